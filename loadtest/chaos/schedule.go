package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"flashsale/loadtest"
	"flashsale/loadtest/cluster"
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
	// NodeOperator runs one operator action, drawn at random from
	// OperatorActions, on a Redis node that keeps running, and undoes it
	// at its end where it has an undo. Never node 0, for the reason
	// NodeWipe gives.
	NodeOperator = "node-operator"
	// NodeFailover fails node 0 over: for the whole run it is a
	// Sentinel-managed master with one replica, reached through the
	// sentinels (the app's -redis-sentinel); the fault cuts the instances
	// off two other nodes (so Redlock leases hold a bare quorum with node
	// 0), holds replication back, kills the master as soon as a lease
	// begins on it, lets the sentinels promote the replica (which lacks
	// that lease and every key since), and at its end brings the old
	// master back as the new one's replica, so that it can repeat
	// (cluster.Failover, the matrix's failover recipe).
	NodeFailover = "node-failover"
	// NodePause freezes a Redis node (SIGSTOP), then thaws it (SIGCONT).
	NodePause = "node-pause"
	// NodePauseFirst freezes node 0, then thaws it: the single-node rungs'
	// node and the one that holds the speed layer's waiting lines, which
	// NodePause hits only by chance. A frozen node keeps its connections
	// open and answers nothing: the line and the votes must go on without
	// it. Not drawn in a run with NodeFailover, for the reason NodePause
	// spares node 0 then.
	NodePauseFirst = "node0-pause"
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
//
// With NodeFailover in a run, node 0 is the Sentinel-managed master, and
// the others are four of the plain nodes. The instances reach it through
// the sentinels, not through the network's proxies: the network faults
// leave it alone (a partition cuts instance B off node 1 only). Node
// crashes and pauses spare it too: its servers keep no AOF, so a crash
// would be a wipe, and a long pause a failover of its own.
var FaultKinds = []string{NodeCrash, NodeWipe, NodeFlush, NodeOperator, NodeFailover, NodePause, NodePauseFirst, loadtest.ClockJump, AppPause, AppCrash, NetLatency, NetDelay, loadtest.Partition}

// nodeLane are the kinds that hit Redis nodes; the others hit app
// processes and the network. Each lane runs one fault at a time, and the
// two lanes overlap: a node can be down while an app is paused.
var nodeLane = []string{NodeCrash, NodeWipe, NodeFlush, NodeOperator, NodeFailover, NodePause, NodePauseFirst, loadtest.ClockJump}

// failoverTakes is about how long a failover itself takes, before its
// event's own duration: the sentinels call a silent master down after
// three seconds, agree and promote in one or two more, and the old master's
// return as a replica resyncs it. Node 0 lacks its replica meanwhile, so the
// lane's next fault waits.
const failoverTakes = 8 * time.Second

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
	// Action is the operator action of a NodeOperator event.
	Action string `json:"action,omitempty"`
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
	sentinel := slices.Contains(kinds, NodeFailover)
	lanes := [][]string{{}, {}}
	for _, k := range kinds {
		switch {
		case k == NodePauseFirst && sentinel:
			// Node 0 is the Sentinel-managed master: not paused.
		case slices.Contains(nodeLane, k):
			lanes[0] = append(lanes[0], k)
		default:
			lanes[1] = append(lanes[1], k)
		}
	}
	for lane, ks := range lanes {
		if len(ks) == 0 {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(lane)+1))
		between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
		// anyNode is a node a crash or a pause may hit: node 0 only while it
		// is a plain node.
		anyNode := func() int {
			if sentinel {
				return 1 + rng.IntN(nodes-1)
			}
			return rng.IntN(nodes)
		}
		end := d - 2*ttl
		for t := between(ttl, 4*ttl); ; {
			e := NemesisEvent{At: t, Kind: ks[rng.IntN(len(ks))]}
			switch e.Kind {
			case NodeCrash, NodePause:
				e.Nodes, e.For = []int{anyNode()}, between(ttl/2, 3*ttl)
			case NodePauseFirst:
				e.Nodes, e.For = []int{0}, between(ttl/2, 3*ttl)
			case NodeWipe:
				e.Nodes, e.For = []int{1 + rng.IntN(nodes-1)}, between(ttl/2, 3*ttl)
			case NodeFlush:
				e.Nodes = []int{1 + rng.IntN(nodes-1)}
			case NodeOperator:
				e.Nodes, e.Action = []int{1 + rng.IntN(nodes-1)}, OperatorActions[rng.IntN(len(OperatorActions))].Name
				e.For = between(ttl/2, 2*ttl)
			case NodeFailover:
				e.Nodes, e.For = []int{0}, failoverTakes+between(ttl, 3*ttl)
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
