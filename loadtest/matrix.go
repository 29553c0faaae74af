package loadtest

import (
	"fmt"
	"slices"
	"time"

	"flashsale/curriculum"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/storefront"
)

// Variants are the lock variants in ladder order, as the lock package
// declares them. They are the values of the X-Lock-Variant header; the runner
// knows them only as names.
var Variants = curriculum.Names()

// Scenario names: the columns of the matrix.
const (
	Clean                    = "clean"
	CrashBetweenSteps        = "crash-between-steps"
	PauseBetweenReleaseSteps = "pause-between-release-steps"
	PauseInCriticalSection   = "pause-in-critical-section"
	NodeDown                 = "node-down"
	NodeRestart              = "node-restart"
	// NodeRestartUnaware is node-restart with the app's Redlock restart
	// awareness turned off. docs/design.md gives it as the second half of the
	// redlock cell ("breaks without restart awareness, holds with it"); here
	// it is its own column so both halves are measured, on the Redlock
	// variants only (no other variant has restart awareness to turn off).
	NodeRestartUnaware = "node-restart-unaware"
	// ClockJump makes the clocks of a majority of the nodes (node 0
	// among them) leap forward again and again while holders work.
	ClockJump = "clock-jump"
	// NetworkDelay delays every reply from the nodes to one app instance
	// past the lease TTL: a grant that arrives after its lease ran out.
	NetworkDelay = "network-delay"
	// Partition cuts instance 0 off the last two nodes and instance 1 off
	// the first two (Redlock variants only).
	Partition = "partition"
	// Failover puts the first node behind Redis Sentinel (a master, its
	// replica, three sentinels) and kills the master after a grant it has
	// not replicated: the promoted replica grants the same lock again. For
	// Redlock the first node is one vote of five, and the lease holds a
	// bare quorum with it (the instances are cut off two other nodes while
	// it is granted): a promoted replica that votes at once grants it
	// again, unless restart awareness sees that its data are new.
	Failover = "failover"
	// FailoverUnaware is failover with the app's Redlock restart awareness
	// off (Redlock rungs only).
	FailoverUnaware = "failover-unaware"
	// LongWork is a business step longer than the lease TTL, watchdog off.
	LongWork = "long-work"
	// LongWorkWatchdog is long-work with the lease watchdog on.
	LongWorkWatchdog = "long-work-watchdog"
	// PauseAfterLeaseCheck pauses holders after their last look at the
	// lease (lua+check's check) and before their write.
	PauseAfterLeaseCheck = "pause-after-lease-check"
)

// Scenario is one column of the matrix: the app's faults and business work,
// and what happens to the Redis nodes during the attack.
type Scenario struct {
	Name string `json:"name"`
	// Doc says what the scenario does to the sale, for the report.
	Doc string `json:"doc"`
	// WorkMS is the business work inside every critical section: the window
	// a broken lock lets two holders into. Never zero, so that `none` has
	// a real race to lose in every column.
	WorkMS int                `json:"work_ms"`
	Faults []storefront.Fault `json:"faults,omitempty"`
	// Nodes is what happens to the Redis nodes during the attack; nil for
	// nothing. It needs nodes the runner started itself.
	Nodes *cluster.NodeRecipe `json:"nodes,omitempty"`
	// Unaware runs the cells on app instances with Redlock restart
	// awareness off.
	Unaware bool `json:"restart_aware_off,omitempty"`
	// LockTTL, when set, runs the cells on app instances with this lease
	// TTL instead of the run's.
	LockTTL time.Duration `json:"lock_ttl_ns,omitempty"`
	// MinDuration, when longer than the run's duration, is how long the
	// scenario's attacks last: a scenario whose fault comes in rounds needs
	// several of them.
	MinDuration time.Duration `json:"min_duration_ns,omitempty"`
	// Only restricts the scenario to these variants; nil means all. It is
	// the ladder's: the rungs that do not skip the column (curriculum.Lesson.Skips)
	// and, for a column only Redlock means anything to, the Quorum rungs.
	Only []string `json:"only,omitempty"`
	// Failover runs the cells on app instances whose first node is the
	// master of a Sentinel cluster the runner starts (-redis-sentinel).
	Failover bool `json:"failover,omitempty"`
	// Watchdog runs the cells with the lease watchdog on, switched at run
	// time with the fault plan (so it needs no instance restart).
	Watchdog bool `json:"watchdog,omitempty"`
}

// Applies reports whether the scenario has a cell for variant.
func (s Scenario) Applies(variant string) bool {
	return s.Only == nil || slices.Contains(s.Only, variant)
}

// Scenarios are the columns of the matrix for a lease TTL of ttl (the app's
// -lock-ttl): every pause that must outlast a lease is a multiple of ttl,
// so it does whatever the TTL, and the node-restart recipe holds the lease long
// enough (a slow critical section) for a restart to land inside it.
func Scenarios(ttl time.Duration) []Scenario {
	pause := int((ttl * 8 / 5).Milliseconds())
	// The late DEL of a release paused past the TTL does harm only if it
	// lands on a holder still at work; every holder in between that paused
	// too is a DEL wasted on a lock nobody is using. So the pause outlasts
	// the TTL by a little (1.2 ×), and the critical section is long.
	releasePause := int((ttl * 6 / 5).Milliseconds())
	restart := func(unaware bool) Scenario {
		// A restarted node must be back, and a second client in, while the
		// first is still inside its critical section. On a loaded machine a
		// redis-server restart takes up to half a second, and a fresh
		// connection needs several round trips inside the lock's per-node
		// timeout (TTL/20), so these columns run with four times the lease
		// TTL: a critical section of 0.4 TTL, and a per-node timeout four
		// times as patient.
		ttl := 4 * ttl
		s := Scenario{
			Name: NodeRestart,
			Doc: fmt.Sprintf("lease TTL %v and every critical section slow (%d ms); in rounds, the last nodes are killed so leases hold "+
				"a bare quorum; as such a lease begins, node 0 (one of that quorum, and the single-node variants' only node) is restarted "+
				"without its data and the killed nodes come back empty", ttl, slowWork(ttl)),
			WorkMS:  slowWork(ttl),
			Nodes:   cluster.RestartRecipe(ttl, time.Duration(slowWork(ttl))*time.Millisecond),
			LockTTL: ttl,
			// Each restart round is one chance for the second client to get
			// in while the first still works; on a loaded machine a round
			// can miss, so a cell runs long enough for a few rounds.
			MinDuration: 5 * ttl / 2,
		}
		if unaware {
			return unawareTwin(s, NodeRestartUnaware)
		}
		return s
	}
	return skipping([]Scenario{
		{
			Name:   Clean,
			Doc:    "concurrency only: a 5 ms critical section and no fault",
			WorkMS: 5,
		},
		{
			Name:   CrashBetweenSteps,
			Doc:    "5% of acquires are abandoned right after acquire step 1, as by a process dying there",
			WorkMS: 5,
			Faults: []storefront.Fault{{Point: "after-acquire-step1", Action: "crash", P: 0.05}},
		},
		{
			Name: PauseBetweenReleaseSteps,
			Doc: fmt.Sprintf("15%% of releases pause %d ms (longer than the %v TTL) between their check and their delete; "+
				"a 50 ms critical section, so the late delete mostly lands on a holder still at work", releasePause, ttl),
			WorkMS: 50,
			Faults: []storefront.Fault{{Point: "between-release-steps", Action: "pause", P: 0.15, MS: releasePause}},
			// About one fired pause in five lands on a holder at work: a
			// cell needs a few dozen to show it for certain.
			MinDuration: 3 * time.Second,
		},
		{
			Name:   PauseInCriticalSection,
			Doc:    fmt.Sprintf("10%% of holders pause %d ms (longer than the %v TTL) between reading and writing stock", pause, ttl),
			WorkMS: 5,
			Faults: []storefront.Fault{{Point: "in-critical-section", Action: "pause", P: 0.1, MS: pause}},
		},
		{
			Name:   NodeDown,
			Doc:    "a third into the run, 2 of the 5 Redis nodes are stopped (never node 0, which single-node variants use)",
			WorkMS: 5,
			Nodes:  cluster.DownRecipe(),
		},
		restart(false),
		restart(true),
		{
			Name: ClockJump,
			Doc: fmt.Sprintf("from 10%% to 90%% of the run, every %v the clocks of nodes 0–2 jump %v ahead (simulated on the node: every lock key's TTL "+
				"shortened by the jump, so a lease being used expires under its holder); a 50 ms critical section", ttl/2, 2*ttl),
			WorkMS:      50,
			Nodes:       cluster.ClockJumpRecipe(ttl),
			MinDuration: 3 * time.Second,
		},
		{
			Name: NetworkDelay,
			Doc: fmt.Sprintf("from the start to 90%% of the run, every reply from the nodes to app instance 0 arrives %v late (longer than the %v TTL); "+
				"the other instances are not slowed", 6*ttl/5, ttl),
			WorkMS: 20,
			Nodes:  cluster.DelayRecipe(6 * ttl / 5),
			// The delay must stay under the lock wait (1s), or the late grant
			// is never used: the cell runs with the run's TTL, which the
			// command keeps at 500 ms by default.
			MinDuration: 3 * time.Second,
		},
		longWork(ttl, false),
		longWork(ttl, true),
		{
			Name: PauseAfterLeaseCheck,
			Doc: fmt.Sprintf("10%% of holders pause %d ms (longer than the %v TTL) after their last look at the lease, just before writing stock "+
				"(for a variant that does not check, the same place)", pause, ttl),
			WorkMS: 5,
			Faults: []storefront.Fault{{Point: "after-lease-check", Action: "pause", P: 0.1, MS: pause}},
		},
		{
			Name:        Partition,
			Doc:         "from 10% to 90% of the run, app instance 0 reaches only nodes 0–2 and instance 1 only nodes 2–4 (both ways cut); instance 2 reaches all",
			WorkMS:      20,
			Nodes:       cluster.PartitionRecipe(),
			MinDuration: 3 * time.Second,
			Only:        quorumRungs(Partition),
		},
		failoverScenario(false),
		failoverScenario(true),
	})
}

// skipping restricts each scenario that some rung skips (curriculum.Lesson.Skips)
// to the rungs that do not.
func skipping(scenarios []Scenario) []Scenario {
	for i, s := range scenarios {
		if s.Only == nil && slices.ContainsFunc(curriculum.Lessons(), func(r curriculum.Lesson) bool { return r.Skips[s.Name] != "" }) {
			scenarios[i].Only = rungsIn(s.Name)
		}
	}
	return scenarios
}

// failoverScenario is the failover column. Its times are the failover's,
// not the lease TTL's: the sentinels call a master down after three seconds
// of silence and need one or two more to agree and promote, so the first
// holder's critical section must outlast that for the second holder to
// meet it, and the lease must outlast the critical section (a lease that
// expires under its holder would break lua by itself, failover or not).
func failoverScenario(unaware bool) Scenario {
	s := Scenario{
		Name: Failover,
		Doc: fmt.Sprintf("the first node is a Sentinel-managed master with one replica (Redlock: one of five nodes); lease TTL %v and every critical section %d ms; "+
			"the instances are cut off the last two of Redlock's nodes, replication is held back, the master killed as soon as a lease is granted, "+
			"the replica promoted without it, and the cut healed", failoverTTL, failoverWork),
		WorkMS:      failoverWork,
		Nodes:       cluster.FailoverRecipe(),
		LockTTL:     failoverTTL,
		MinDuration: 8 * time.Second,
		Failover:    true,
	}
	if unaware {
		return unawareTwin(s, FailoverUnaware)
	}
	return s
}

// unawareTwin is scenario s, named name, on app instances started with
// Redlock restart awareness off: the Redlock rungs only.
func unawareTwin(s Scenario, name string) Scenario {
	s.Doc = fmt.Sprintf("as %s, on app instances started with Redlock restart awareness off", s.Name)
	s.Name, s.Unaware, s.Only = name, true, quorumRungs(name)
	return s
}

// rungsIn lists the rungs that have a cell in the scenario: those whose
// ladder entry does not skip it.
func rungsIn(scenario string) []string {
	return rungNames(func(r curriculum.Lesson) bool { return r.Skips[scenario] == "" })
}

// quorumRungs lists the Redlock rungs that have a cell in the scenario:
// the only ones a partition of the nodes or restart awareness means
// anything to.
func quorumRungs(scenario string) []string {
	return rungNames(func(r curriculum.Lesson) bool { return r.Quorum && r.Skips[scenario] == "" })
}

// rungNames lists, in ladder order, the rungs keep keeps.
func rungNames(keep func(curriculum.Lesson) bool) []string {
	var out []string
	for _, r := range curriculum.Lessons() {
		if keep(r) {
			out = append(out, r.Name)
		}
	}
	return out
}

// failoverWork and failoverTTL: see failoverScenario.
const (
	failoverWork = 10000
	failoverTTL  = 30 * time.Second
)

// longWork is the watchdog's column: every critical section is two TTLs
// long, so every lease runs out under its holder unless a watchdog extends
// it; the second form has the watchdog on. Two TTLs, not a little over one,
// so that the successor is in and has read before the first holder writes.
func longWork(ttl time.Duration, watchdog bool) Scenario {
	s := Scenario{
		Name: LongWork,
		Doc: fmt.Sprintf("every critical section works %v, twice the %v TTL, with no lease watchdog; no fault",
			2*ttl, ttl),
		WorkMS: int((2 * ttl).Milliseconds()),
		// A critical section is a second long: a cell needs a few per key.
		MinDuration: 3 * time.Second,
	}
	if watchdog {
		s.Name, s.Watchdog = LongWorkWatchdog, true
		s.Doc = fmt.Sprintf("as long-work, with the lease watchdog on (every lease extended every %v until released)", ttl/3)
	}
	return s
}

// WatchdogTwin is the column a scenario runs as when a run turns the
// watchdog on for every cell (Config.Watchdog): long-work becomes
// long-work-watchdog; every other column stays itself, and is judged as
// ExpectedWatchdog says.
func WatchdogTwin(scenario string) string {
	if scenario == LongWork {
		return LongWorkWatchdog
	}
	return scenario
}

// slowWork is the critical section of the node-restart scenarios: long
// enough that a lease is still inside it when a restarted node answers
// again, short enough (under half the TTL) that no lease outlives its TTL.
func slowWork(ttl time.Duration) int {
	return int((ttl * 2 / 5).Milliseconds())
}

// ScenarioNames lists the scenario names in column order.
func ScenarioNames() []string {
	var out []string
	for _, s := range Scenarios(time.Second) {
		out = append(out, s.Name)
	}
	return out
}
