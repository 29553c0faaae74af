package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/clock"
	"flashsale/loadtest"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/storefront"
)

// Nemesis fault kinds: what the chaos runner does to the world while the
// clients work.
const (
	// NodeCrash kills a Redis node (SIGKILL) and restarts it with its data
	// (AOF) a moment later.
	NodeCrash = "node-crash"
	// NodeWipe kills a Redis node and restarts it without its data. Never
	// node 0: a wipe there only makes lua+fence refuse every later token
	// for good (unavailable, the node-restart cell of the matrix), which
	// would blind the rest of the run for it.
	NodeWipe = "node-wipe"
	// NodeFlush empties a Redis node with FLUSHALL while it keeps running:
	// the same process, the same uptime, no data. Never node 0, for the
	// reason NodeWipe gives.
	NodeFlush = "node-flush"
	// NodePause freezes a Redis node (SIGSTOP), then thaws it (SIGCONT).
	NodePause = "node-pause"
	// AppPause freezes a whole app process (SIGSTOP) past the lease TTL,
	// then thaws it: a real stop-the-world pause.
	AppPause = "app-pause"
	// AppCrash kills an app process (SIGKILL) and starts it again.
	AppCrash = "app-crash"
	// NetLatency slows every reply from the nodes to one app instance by
	// a few tens of milliseconds.
	NetLatency = "net-latency"
	// NetDelay holds every reply from the nodes to one app instance for
	// longer than the lease TTL: a grant that arrives after the lease it
	// grants has run out.
	NetDelay = "net-delay"
)

// FaultKinds lists every nemesis fault kind. Two share their names with
// the matrix's scenarios: loadtest.ClockJump makes the clocks of 3 of the 5 nodes
// (node 0, the single-node variants' node, among them) leap forward once,
// by shortening every lock key's TTL there (see cluster.JumpClocks); Partition
// cuts instance A off nodes 3 and 4 (it reaches 0–2) and instance B off
// nodes 0 and 1 (it reaches 2–4), both ways.
var FaultKinds = []string{NodeCrash, NodeWipe, NodeFlush, NodePause, loadtest.ClockJump, AppPause, AppCrash, NetLatency, NetDelay, loadtest.Partition}

// nodeLane are the kinds that hit Redis nodes; the others hit app
// processes and the network. Each lane runs one fault at a time, and the
// two lanes overlap: a node can be down while an app is paused.
var nodeLane = []string{NodeCrash, NodeWipe, NodeFlush, NodePause, loadtest.ClockJump}

// NemesisEvent is one fault of the schedule.
type NemesisEvent struct {
	// At is when it begins, from the start of the run.
	At time.Duration `json:"at_ns"`
	// For is how long it lasts; 0 for an instant (a clock jump).
	For  time.Duration `json:"for_ns"`
	Kind string        `json:"kind"`
	// Nodes and Apps are the targets, by index.
	Nodes []int `json:"nodes,omitempty"`
	Apps  []int `json:"apps,omitempty"`
	// Size is the clock jump or the network delay.
	Size time.Duration `json:"size_ns,omitempty"`
}

// Target names the event's targets for the log.
func (e NemesisEvent) Target() string {
	var parts []string
	switch e.Kind {
	case loadtest.Partition:
		return fmt.Sprintf("app %d reaches nodes 0–2, app %d nodes 2–4", e.Apps[0], e.Apps[1])
	}
	if len(e.Apps) > 0 {
		parts = append(parts, "app "+cluster.Indexes(e.Apps))
	}
	if len(e.Nodes) > 0 {
		parts = append(parts, "node "+cluster.Indexes(e.Nodes))
	}
	return strings.Join(parts, ", ")
}

// Schedule draws the nemesis's faults for a run of duration d from seed:
// the same seed, kinds, TTL and sizes give the same faults at the same
// moments. Faults stop one TTL before the end, so the last one is healed
// while clients still work.
func Schedule(seed uint64, d, ttl time.Duration, kinds []string, apps, nodes int) []NemesisEvent {
	var out []NemesisEvent
	lanes := [][]string{{}, {}}
	for _, k := range kinds {
		if slices.Contains(nodeLane, k) {
			lanes[0] = append(lanes[0], k)
		} else {
			lanes[1] = append(lanes[1], k)
		}
	}
	for lane, ks := range lanes {
		if len(ks) == 0 {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(lane)+1))
		between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
		end := d - 2*ttl
		for t := between(ttl, 4*ttl); ; {
			e := NemesisEvent{At: t, Kind: ks[rng.IntN(len(ks))]}
			switch e.Kind {
			case NodeCrash, NodePause:
				e.Nodes, e.For = []int{rng.IntN(nodes)}, between(ttl/2, 3*ttl)
			case NodeWipe:
				e.Nodes, e.For = []int{1 + rng.IntN(nodes-1)}, between(ttl/2, 3*ttl)
			case NodeFlush:
				e.Nodes = []int{1 + rng.IntN(nodes-1)}
			case loadtest.ClockJump:
				others := rng.Perm(nodes - 1)[:nodes/2]
				e.Nodes = []int{0}
				for _, o := range others {
					e.Nodes = append(e.Nodes, o+1)
				}
				sort.Ints(e.Nodes)
				e.Size = between(ttl/2, 2*ttl)
			case AppPause:
				e.Apps, e.For = []int{rng.IntN(apps)}, between(3*ttl/2, 3*ttl)
			case AppCrash:
				e.Apps, e.For = []int{rng.IntN(apps)}, between(ttl/2, 2*ttl)
			case NetLatency:
				e.Apps, e.For, e.Size = []int{rng.IntN(apps)}, between(2*ttl, 6*ttl), between(5*time.Millisecond, 40*time.Millisecond)
			case NetDelay:
				e.Apps, e.For, e.Size = []int{rng.IntN(apps)}, between(2*ttl, 4*ttl), between(6*ttl/5, 8*ttl/5)
			case loadtest.Partition:
				p := rng.Perm(apps)
				e.Apps, e.For = []int{p[0], p[1%apps]}, between(2*ttl, 6*ttl)
			}
			if e.At+e.For > end {
				break
			}
			out = append(out, e)
			t = e.At + e.For + between(ttl, 4*ttl)
		}
	}
	slices.SortStableFunc(out, func(a, b NemesisEvent) int { return int(a.At - b.At) })
	return out
}

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
	switch e.Kind {
	case NodeCrash, NodeWipe:
		err = l.Redis().Nodes[e.Nodes[0]].Kill()
		keep := e.Kind == NodeCrash
		detail = map[bool]string{true: "SIGKILL; restarts with its data (AOF)", false: "SIGKILL; restarts without its data"}[keep]
		undo = func() error {
			if keep {
				return l.Redis().Nodes[e.Nodes[0]].Start(undoCtx)
			}
			return l.Redis().Nodes[e.Nodes[0]].Restart(undoCtx, false)
		}
	case NodeFlush:
		err, detail = flushNode(ctx, l.Redis().Nodes[e.Nodes[0]].URL()), "FLUSHALL: the node keeps running, without its data"
	case NodePause:
		err, detail = l.Redis().Nodes[e.Nodes[0]].Pause(), "SIGSTOP, then SIGCONT"
		undo = l.Redis().Nodes[e.Nodes[0]].Resume
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
		err = l.Network().Delay(e.Apps[0], cluster.All(len(l.Redis().Nodes)), e.Size, e.Size/10)
		detail = fmt.Sprintf("every reply from the nodes %v late", e.Size)
		undo = func() error { return l.Network().Heal(undoCtx) }
	case loadtest.Partition:
		nodes := len(l.Redis().Nodes)
		err = errors.Join(l.Network().Cut(e.Apps[0], []int{nodes - 2, nodes - 1}), l.Network().Cut(e.Apps[1], []int{0, 1}))
		detail = "asymmetric: each instance still reaches a majority, node 2 both"
		undo = func() error { return l.Network().Heal(undoCtx) }
	default:
		err = fmt.Errorf("unknown fault kind %q", e.Kind)
	}
	if err != nil {
		n.logger.Warn("nemesis fault", "kind", e.Kind, "target", e.Target(), "err", err)
		detail += "; failed: " + err.Error()
	}
	if undo == nil {
		n.log.write("instant", e, detail)
		return
	}
	n.log.write("start", e, detail)
	t := time.NewTimer(e.For)
	select { // a fault is undone early only when the run is interrupted
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	if err := undo(); err != nil {
		n.logger.Warn("nemesis heal", "kind", e.Kind, "target", e.Target(), "err", err)
		n.log.write("end", e, "heal failed: "+err.Error())
		return
	}
	n.log.write("end", e, "")
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
		urls = append(urls, n.local.Redis().Nodes[i].URL())
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
