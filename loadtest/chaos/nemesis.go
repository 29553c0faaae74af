package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/clock"
	"flashsale/internal/localredis"
	"flashsale/loadtest"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/storefront"
)

// nemesisLog appends the nemesis's events to a JSON-lines file, in the
// format the checker reads.
type nemesisLog struct {
	mu  sync.Mutex
	f   *os.File
	err error
	// counts are the faults begun, by kind.
	counts map[string]int
	// events are the log's lines, for the report's timeline.
	events []NemesisRecord
}

// NemesisRecord is one line of the nemesis log.
type NemesisRecord struct {
	Time   time.Time `json:"t"`
	Kind   string    `json:"kind"` // always "nemesis"
	Op     string    `json:"op"`   // "start", "end" or "instant"
	Fault  string    `json:"fault"`
	Target string    `json:"target"`
	Detail string    `json:"detail,omitempty"`
}

func openNemesisLog(path string) (*nemesisLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &nemesisLog{f: f, counts: map[string]int{}}, nil
}

func (l *nemesisLog) write(op string, e NemesisEvent, detail string) {
	rec := NemesisRecord{Time: time.Now(), Kind: "nemesis", Op: op, Fault: e.Kind, Target: e.Target(), Detail: detail}
	b, _ := json.Marshal(rec) // a struct of strings and a time always encodes
	l.mu.Lock()
	defer l.mu.Unlock()
	if op != "end" {
		l.counts[e.Kind]++
	}
	l.events = append(l.events, rec)
	if _, err := l.f.Write(append(b, '\n')); err != nil && l.err == nil {
		l.err = err
	}
}

func (l *nemesisLog) close() error {
	return errors.Join(l.err, l.f.Close())
}

// nemesis plays a schedule on a local environment.
type nemesis struct {
	local   *cluster.Local
	plan    storefront.FaultPlan // given again to an instance restarted after a crash
	pattern string               // lock keys in Redis
	log     *nemesisLog
	logger  interface{ Warn(string, ...any) }
	// sentinel is node 0's Sentinel cluster in a run with NodeFailover,
	// else nil.
	sentinel *localredis.SentinelCluster
	// recovery probes a node after each NodeOperator fault; nil probes
	// none.
	recovery *recoveries
}

// node is the server that is node i now: with a Sentinel cluster, node 0
// is its master and node i the plain node i−1 (as the instances' -redis
// list is laid out then).
func (n *nemesis) node(ctx context.Context, i int) (*localredis.Node, error) {
	if n.sentinel == nil {
		return n.local.Redis().Nodes[i], nil
	}
	if i == 0 {
		return n.sentinel.Master(ctx)
	}
	return n.local.Redis().Nodes[i-1], nil
}

// links are the network's proxies to nodes: with a Sentinel cluster node
// 0 has none (the instances reach it through the sentinels), and node i is
// the plain node i−1.
func (n *nemesis) links(nodes []int) []int {
	if n.sentinel == nil {
		return nodes
	}
	var out []int
	for _, i := range nodes {
		if i > 0 {
			out = append(out, i-1)
		}
	}
	return out
}

// run plays every event at its time from start, each lane in its own
// goroutine, and heals whatever is still broken when ctx ends.
func (n *nemesis) run(ctx context.Context, start time.Time, events []NemesisEvent) {
	byLane := map[bool][]NemesisEvent{}
	for _, e := range events {
		node := slices.Contains(nodeLane, e.Kind)
		byLane[node] = append(byLane[node], e)
	}
	var wg sync.WaitGroup
	for _, lane := range byLane {
		wg.Go(func() {
			for _, e := range lane {
				if !clock.Sleep(ctx, time.Until(start.Add(e.At))) {
					return
				}
				n.play(ctx, e)
			}
		})
	}
	wg.Wait()
}

// play does one fault, waits out its duration (even when ctx ends: a
// fault is never left in place) and undoes it.
func (n *nemesis) play(ctx context.Context, e NemesisEvent) {
	l := n.local
	undoCtx := context.WithoutCancel(ctx)
	var undo func() error
	var err error
	detail := ""
	began := time.Now()
	logged, endDetail := false, ""                 // a fault that logs its own start
	ended := func(undone *time.Time, err error) {} // told when the fault is over
	switch e.Kind {
	case NodeCrash, NodeWipe:
		var node *localredis.Node
		if node, err = n.node(ctx, e.Nodes[0]); err == nil {
			err = node.Kill()
		}
		keep := e.Kind == NodeCrash
		detail = map[bool]string{true: "SIGKILL; restarts with its data (AOF)", false: "SIGKILL; restarts without its data"}[keep]
		undo = func() error {
			if node == nil {
				return nil
			}
			if keep {
				return node.Start(undoCtx)
			}
			return node.Restart(undoCtx, false)
		}
	case NodeFlush:
		detail = "FLUSHALL: the node keeps running, without its data"
		var node *localredis.Node
		if node, err = n.node(ctx, e.Nodes[0]); err == nil {
			err = flushNode(ctx, node.URL())
		}
	case NodeOperator:
		var node *localredis.Node
		var undoOp func(context.Context) error
		if node, err = n.node(ctx, e.Nodes[0]); err == nil {
			undoOp, detail, err = operate(ctx, node.URL(), e.Action)
		}
		if undoOp != nil {
			undo = func() error { return undoOp(undoCtx) }
		}
		done, doErr := time.Now(), err
		ended = func(undone *time.Time, err error) {
			if n.recovery != nil && node != nil {
				n.recovery.probe(e, node.URL(), done, undone, errors.Join(doErr, err))
			}
		}
	case NodeFailover:
		// Logged as begun before its steps, which take seconds: a second
		// holder it lets in must find it begun. Played to its end even if
		// the run ends meanwhile, so that undo finds a failover done.
		n.log.write("start", e, "cut, replication held back, the master killed as soon as a lease begins on it, the replica promoted")
		logged = true
		var notes []string
		// It waits for an SKU's lease, not a seat's: a seat's other grabs
		// came at once and have given up by the time the replica is
		// promoted, while an SKU's buyers keep coming.
		skus := strings.TrimSuffix(n.pattern, "*") + "sku:*"
		_, err = cluster.Failover(undoCtx, l.Nodes(), skus, func(s string) { notes = append(notes, s) })
		endDetail = strings.Join(notes, "; ")
		undo = func() error { return n.sentinel.Heal(undoCtx) }
	case NodePause, NodePauseFirst:
		detail = "SIGSTOP, then SIGCONT"
		var node *localredis.Node
		if node, err = n.node(ctx, e.Nodes[0]); err == nil {
			err = node.Pause()
		}
		undo = func() error {
			if node == nil {
				return nil
			}
			return node.Resume()
		}
	case loadtest.ClockJump:
		var moved int
		moved, err = n.jump(ctx, e.Nodes, e.Size)
		detail = fmt.Sprintf("clocks %v ahead: %d lock keys' TTLs shortened by that", e.Size, moved)
	case AppPause:
		err, detail = l.PauseApp(e.Apps[0]), fmt.Sprintf("SIGSTOP pid %d, then SIGCONT", l.PID(e.Apps[0]))
		undo = func() error { return l.ResumeApp(e.Apps[0]) }
	case AppCrash:
		detail = fmt.Sprintf("SIGKILL pid %d, then a new process at the same address", l.PID(e.Apps[0]))
		err = l.CrashApp(e.Apps[0])
		undo = func() error { return n.restartApp(undoCtx, e.Apps[0]) }
	case NetLatency, NetDelay:
		err = l.Network().Delay(e.Apps[0], n.links(cluster.All(len(l.Redis().Nodes))), e.Size, e.Size/10)
		detail = fmt.Sprintf("every reply from the nodes %v late", e.Size)
		undo = func() error { return l.Network().Heal(undoCtx) }
	case loadtest.Partition:
		nodes := len(l.Redis().Nodes)
		err = errors.Join(l.Network().Cut(e.Apps[0], n.links([]int{nodes - 2, nodes - 1})), l.Network().Cut(e.Apps[1], n.links([]int{0, 1})))
		detail = "asymmetric: each instance still reaches a majority, node 2 both"
		undo = func() error { return l.Network().Heal(undoCtx) }
	default:
		err = fmt.Errorf("unknown fault kind %q", e.Kind)
	}
	if err != nil {
		n.logger.Warn("nemesis fault", "kind", e.Kind, "target", e.Target(), "err", err)
		detail += "; failed: " + err.Error()
		endDetail += "; failed: " + err.Error()
	}
	if undo == nil {
		n.log.write("instant", e, detail)
		ended(nil, nil)
		return
	}
	if !logged {
		n.log.write("start", e, detail)
	}
	t := time.NewTimer(e.For - time.Since(began)) // a failover's own time is part of its event
	select {                                      // a fault is undone early only when the run is interrupted
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	err = undo()
	undone := time.Now()
	ended(&undone, err)
	if err != nil {
		n.logger.Warn("nemesis heal", "kind", e.Kind, "target", e.Target(), "err", err)
		n.log.write("end", e, strings.TrimPrefix(endDetail+"; heal failed: "+err.Error(), "; "))
		return
	}
	n.log.write("end", e, strings.TrimPrefix(endDetail, "; "))
}

// restartApp starts a crashed instance again and gives it the run's
// business work: a new process starts with none, and a shorter critical
// section would quietly make the rest of the run a different one.
func (n *nemesis) restartApp(ctx context.Context, i int) error {
	if err := n.local.RestartApp(ctx, i); err != nil {
		return err
	}
	return storefront.API{Base: n.local.Bases()[i], Token: n.local.Token()}.SetFaults(ctx, n.plan)
}

// jump makes the clock jump on the given nodes.
func (n *nemesis) jump(ctx context.Context, nodes []int, by time.Duration) (int, error) {
	var urls []string
	for _, i := range nodes {
		node, err := n.node(ctx, i)
		if err != nil {
			return 0, err
		}
		urls = append(urls, node.URL())
	}
	return cluster.JumpClocks(ctx, urls, n.pattern, by)
}

// flushNode runs FLUSHALL on the node at url, reached directly rather than
// through the instances' proxies.
func flushNode(ctx context.Context, url string) error {
	o, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	return rdb.FlushAll(ctx).Err()
}
