package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/clock"
	"flashsale/internal/localredis"
)

// Nodes is the control a node recipe needs over the Redis nodes, by index;
// node 0 is the one the single-node lock variants use.
type Nodes interface {
	// Len is the number of nodes.
	Len() int
	// Stop stops node i gracefully.
	Stop(ctx context.Context, i int) error
	// Kill kills node i (no flush), like a crash.
	Kill(i int) error
	// Start starts a stopped node i again (empty, without persistence).
	Start(ctx context.Context, i int) error
	// Restart kills node i and starts it again, wiping its data unless keepData.
	Restart(ctx context.Context, i int, keepData bool) error
	// Heal brings every node back: stopped ones started, paused ones resumed.
	Heal(ctx context.Context) error
	// URL is node i's redis:// URL.
	URL(i int) string
}

// NodeRecipe is what happens to the Redis nodes during a scenario's attack.
// Its steps run on a timer from the attack's start, so every variant of a
// scenario meets the same fault at the same moment of its run.
type NodeRecipe struct {
	// Steps describes the recipe for the report.
	Steps string `json:"steps"`
	// MinNodes is the fewest nodes the recipe works with.
	MinNodes int `json:"min_nodes"`
	run      func(ctx context.Context, st stage) error
}

// stage is what a recipe plays on.
type stage struct {
	nodes   Nodes
	d       time.Duration // the attack's duration
	pattern string        // the app's lock keys in Redis
	note    func(string)
}

// Run plays the recipe against n during an attack of duration d, noting
// each step; lockPattern matches the app's lock keys in Redis. It returns
// when the recipe is done or ctx ends. The nodes are left as the recipe
// leaves them: call Nodes.Heal afterwards.
func (r *NodeRecipe) Run(ctx context.Context, n Nodes, d time.Duration, lockPattern string, note func(string)) error {
	if n.Len() < r.MinNodes {
		return fmt.Errorf("the recipe needs at least %d Redis nodes, have %d", r.MinNodes, n.Len())
	}
	start := time.Now()
	stamped := func(msg string) { note(fmt.Sprintf("t+%.2fs: %s", time.Since(start).Seconds(), msg)) }
	return r.run(ctx, stage{nodes: n, d: d, pattern: lockPattern, note: stamped})
}

// minority is the nodes a Redlock quorum can do without: the last
// n − (n/2+1). Node 0 is never among them, so single-node variants keep
// their node.
func minority(n int) []int {
	var out []int
	for i := n/2 + 1; i < n; i++ {
		out = append(out, i)
	}
	return out
}

// DownRecipe stops a minority of nodes a third into the run and leaves them
// down: Redlock must carry on with the bare quorum that is left.
func DownRecipe() *NodeRecipe {
	return &NodeRecipe{
		Steps:    "at 30% of the run, stop the last n−(n/2+1) nodes (nodes 3 and 4 of 5); they stay down until the attack ends",
		MinNodes: 3,
		run: func(ctx context.Context, st stage) error {
			if !clock.Sleep(ctx, st.d*3/10) {
				return nil
			}
			down := minority(st.nodes.Len())
			err := each(down, func(i int) error { return st.nodes.Stop(ctx, i) })
			st.note("stopped nodes " + Indexes(down))
			return err
		},
	}
}

// RestartRecipe is the one place that engineers a Redlock lease holding a
// bare quorum and then takes a vote away from it, repeated while the run
// lasts so it does not hang on one lucky timing:
//
//  1. kill the minority (nodes 3 and 4 of 5): a lease granted from now on
//     has exactly the quorum, nodes 0..2;
//  2. wait until such a lease begins — a lock key held on node 0 changes
//     hands — so its whole (slow) critical section lies ahead (or until a
//     critical section and a margin have passed, if none does);
//  3. at once: restart node 0 without its data, and start the minority
//     again, empty. The holder's vote on node 0 is gone and nodes 0, 3 and
//     4 are free: a quorum for a second client while the first is still in
//     its critical section — unless the client leaves a restarted node out
//     for a TTL (restart awareness).
//
// Node 0 is also the only node of the single-node variants: for them the
// restart simply wipes the lock their holder is relying on.
//
// Killing (not pausing) the minority matters: a paused redis-server still
// accepts connections and runs the SETs queued on them when resumed, which
// would hand the minority's votes to the very lease being tested. And the
// instances reach every node through a proxy (see Network), or their Redis
// client would stop dialling the killed nodes for a second after they are
// back.
func RestartRecipe(ttl, work time.Duration) *NodeRecipe {
	hold := work + ttl/10
	// Each round is a fresh chance for the double grant, so as many as fit;
	// between rounds the nodes stay up long enough for the second client
	// (and a few sales).
	every := hold + ttl/4
	return &NodeRecipe{
		Steps: fmt.Sprintf("from 10%% of the run, every %v until 90%%: kill the last n−(n/2+1) nodes; as soon as a lease granted by "+
			"the remaining bare quorum begins on node 0 (at most %v later), restart node 0 without data and start the killed nodes again, empty",
			every, hold),
		MinNodes: 3,
		run: func(ctx context.Context, st stage) error {
			if !clock.Sleep(ctx, st.d/10) {
				return nil
			}
			minor := minority(st.nodes.Len())
			// Node 0 is in every lease's quorum, single-node or Redlock.
			watch, err := newLeaseWatch(st.nodes.URL(0), st.pattern)
			if err != nil {
				return err
			}
			defer watch.close()
			deadline := time.Now().Add(st.d*9/10 - st.d/10)
			for rep := 1; ; rep++ {
				next := time.Now().Add(every)
				if err := each(minor, st.nodes.Kill); err != nil {
					return err
				}
				// Leases that began before the kill may hold five votes:
				// only a change of hands after it proves a bare quorum.
				fresh := watch.newLease(ctx, hold)
				began := time.Now()
				err := each(append([]int{0}, minor...), func(i int) error {
					if i == 0 {
						return st.nodes.Restart(ctx, 0, false)
					}
					return st.nodes.Start(ctx, i)
				})
				if err != nil {
					return err
				}
				when := fmt.Sprintf("no new lease seen on node 0 within %v", hold)
				if fresh {
					when = "a lease granted without them had just begun"
				}
				st.note(fmt.Sprintf("round %d: killed nodes %s; %s; node 0 restarted without data, nodes %s started empty (%v)",
					rep, Indexes(minor), when, Indexes(minor), time.Since(began).Round(time.Millisecond)))
				// However long the restart took, the nodes stay up for a
				// while: the second client needs their votes.
				next = later(next, time.Now().Add(ttl/4))
				if next.After(deadline) || !clock.Sleep(ctx, time.Until(next)) {
					return nil
				}
			}
		},
	}
}

// leaseWatch sees leases begin on one node: a lock key whose value (the
// holder's random owner value) changes.
type leaseWatch struct {
	rdb     *redis.Client
	pattern string
}

func newLeaseWatch(url, pattern string) (*leaseWatch, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	o.MaxRetries = -1 // one attempt: the next poll is the retry
	return &leaseWatch{rdb: redis.NewClient(o), pattern: pattern}, nil
}

// newLease polls until a lock key changes hands or d has passed, and
// reports whether one did.
func (w *leaseWatch) newLease(ctx context.Context, d time.Duration) bool {
	end := time.Now().Add(d)
	owner := map[string]string{}
	for time.Now().Before(end) && ctx.Err() == nil {
		keys, err := w.rdb.Keys(ctx, w.pattern).Result()
		if err == nil && len(keys) > 0 {
			if vals, err := w.rdb.MGet(ctx, keys...).Result(); err == nil {
				for i, key := range keys {
					v, _ := vals[i].(string) // nil: released meanwhile
					before, seen := owner[key]
					switch {
					case !seen:
						owner[key] = v
					case v != "" && v != before:
						return true
					}
				}
			}
		}
		clock.Sleep(ctx, time.Millisecond)
	}
	return false
}

func (w *leaseWatch) close() { _ = w.rdb.Close() }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// each runs fn for every index in parallel, so nodes change state together.
func each(idx []int, fn func(int) error) error {
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Go(func() {
			if err := fn(i); err != nil {
				errs[k] = fmt.Errorf("node %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Indexes prints node or instance indexes as "0, 1, 2".
func Indexes(idx []int) string {
	s := make([]string, len(idx))
	for k, i := range idx {
		s[k] = fmt.Sprint(i)
	}
	return strings.Join(s, ", ")
}

// clusterNodes is Nodes over a localredis cluster the runner started, and
// the network its instances reach it through.
type clusterNodes struct {
	c     *localredis.Cluster
	net   *Network
	local *Local // for the Sentinel cluster, started when first used
}

// Sentinel is the failover column's Sentinel cluster, nil until started.
func (c clusterNodes) Sentinel() *localredis.SentinelCluster {
	if c.local == nil {
		return nil
	}
	return c.local.sentinel
}

// Network is the links from the instances to the nodes.
func (c clusterNodes) Network() *Network { return c.net }

func (c clusterNodes) Len() int                               { return len(c.c.Nodes) }
func (c clusterNodes) Stop(ctx context.Context, i int) error  { return c.c.Nodes[i].Stop(ctx) }
func (c clusterNodes) Kill(i int) error                       { return c.c.Nodes[i].Kill() }
func (c clusterNodes) Start(ctx context.Context, i int) error { return c.c.Nodes[i].Start(ctx) }
func (c clusterNodes) URL(i int) string                       { return c.c.Nodes[i].URL() }
func (c clusterNodes) Restart(ctx context.Context, i int, keep bool) error {
	return c.c.Nodes[i].Restart(ctx, keep)
}

func (c clusterNodes) Heal(ctx context.Context) error {
	var errs []error
	if sc := c.Sentinel(); sc != nil {
		if err := sc.Heal(ctx); err != nil {
			errs = append(errs, fmt.Errorf("sentinel cluster: %w", err))
		}
	}
	for _, n := range c.c.Nodes {
		if err := n.Resume(); err != nil {
			errs = append(errs, fmt.Errorf("resume node %d: %w", n.Index(), err))
		}
		if !n.Running() {
			if err := n.Start(ctx); err != nil {
				errs = append(errs, fmt.Errorf("start node %d: %w", n.Index(), err))
			}
		}
	}
	return errors.Join(errs...)
}
