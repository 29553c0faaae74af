package chaos

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"flashsale/curriculum"
	"flashsale/loadtest"
)

// The schedule is the seed's: the same seed gives the same faults at the
// same moments, another seed others; it is bounded (no fault outlives the
// run, none overlaps another of its lane) and keeps the promises the
// expectations rest on (no wipe of node 0, clock jumps on a majority with
// node 0, partitions between two different instances, node 0 paused only
// while it is a plain node).
func TestScheduleIsSeededAndBounded(t *testing.T) {
	const d, ttl = 2 * time.Minute, 500 * time.Millisecond
	a := Schedule(7, d, ttl, FaultKinds, 3, 5)
	if !reflect.DeepEqual(a, Schedule(7, d, ttl, FaultKinds, 3, 5)) {
		t.Fatal("the same seed gave another schedule")
	}
	if reflect.DeepEqual(a, Schedule(8, d, ttl, FaultKinds, 3, 5)) {
		t.Fatal("another seed gave the same schedule")
	}
	seen := map[string]int{}
	laneEnd := map[bool]time.Duration{}
	for _, e := range a {
		seen[e.Kind]++
		if e.At < 0 || e.At+e.For > d-2*ttl {
			t.Errorf("%+v does not end two TTLs before the run does", e)
		}
		lane := slices.Contains(nodeLane, e.Kind)
		if e.At < laneEnd[lane] {
			t.Errorf("%+v begins before the fault before it in its lane is healed", e)
		}
		laneEnd[lane] = e.At + e.For
		switch e.Kind {
		case NodeWipe, NodeFlush, NodeCrash, NodePause:
			// With node 0 behind Sentinel, whose servers keep no AOF, a crash
			// would wipe it and a long pause fail it over.
			if e.Nodes[0] == 0 && (e.Kind == NodeWipe || e.Kind == NodeFlush || slices.Contains(FaultKinds, NodeFailover)) {
				t.Errorf("%+v hits node 0", e)
			}
		case NodePauseFirst:
			t.Errorf("%+v pauses node 0 while it is the Sentinel-managed master", e)
		case NodeFailover:
			if !reflect.DeepEqual(e.Nodes, []int{0}) || e.For < failoverTakes {
				t.Errorf("%+v is not a failover of node 0 given a failover's time", e)
			}
		case loadtest.ClockJump:
			if len(e.Nodes) != 3 || e.Nodes[0] != 0 || e.Size <= 0 {
				t.Errorf("%+v is not a jump on a majority with node 0", e)
			}
		case loadtest.Partition:
			if e.Apps[0] == e.Apps[1] {
				t.Errorf("%+v partitions one instance against itself", e)
			}
		case NetDelay:
			if e.Size <= ttl {
				t.Errorf("%+v does not delay replies past the TTL", e)
			}
		}
	}
	for _, k := range FaultKinds {
		if seen[k] == 0 && k != NodePauseFirst {
			t.Errorf("two minutes of every fault kind had no %s", k)
		}
	}
	only := Schedule(7, d, ttl, []string{NodeCrash}, 3, 5)
	if len(only) == 0 || slices.ContainsFunc(only, func(e NemesisEvent) bool { return e.Kind != NodeCrash }) {
		t.Errorf("a schedule of node crashes only: %+v", only)
	}
	// Without a failover in the run node 0 is a plain node, and crashes
	// and pauses hit it too.
	if !slices.ContainsFunc(Schedule(7, d, ttl, []string{NodeCrash, NodePause}, 3, 5), func(e NemesisEvent) bool { return e.Nodes[0] == 0 }) {
		t.Error("crashes and pauses without a failover never hit node 0")
	}
	first := Schedule(7, d, ttl, []string{NodeCrash, NodePauseFirst}, 3, 5)
	if !slices.ContainsFunc(first, func(e NemesisEvent) bool { return e.Kind == NodePauseFirst }) ||
		slices.ContainsFunc(first, func(e NemesisEvent) bool { return e.Kind == NodePauseFirst && e.Nodes[0] != 0 }) {
		t.Errorf("node0-pause without a failover does not pause node 0, and only it: %+v", first)
	}
}

// A variant must hold under faults that cannot break it, and is expected
// to break under one that can.
func TestChaosExpected(t *testing.T) {
	for _, tc := range []struct {
		variant string
		kinds   []string
		unaware bool
		want    loadtest.Outcome
	}{
		{"redlock", []string{NodeCrash, NodeWipe, NodePause, loadtest.Partition, NetDelay, NetLatency, AppCrash}, false, loadtest.Holds},
		{"redlock", []string{NodeCrash, loadtest.ClockJump}, false, loadtest.Breaks},
		{"redlock", []string{AppPause}, false, loadtest.Breaks},
		{"lua", []string{NetDelay}, false, loadtest.Breaks},
		{"lua", []string{NodeCrash, loadtest.Partition}, false, loadtest.Holds},
		{"lua+fence", FaultKinds, false, loadtest.Holds},
		{"redlock+fence", FaultKinds, false, loadtest.Holds},
		{"none", []string{NodeCrash}, false, loadtest.Breaks},
		// A flushed node keeps the instances' connections, but every vote
		// reads the node's data marker after it: awareness sees the flush.
		// Without awareness a flushed or wiped node votes at once; fencing
		// holds either way.
		{"redlock", []string{NodeFlush}, false, loadtest.Holds},
		{"redlock", []string{NodeFlush}, true, loadtest.Breaks},
		{"redlock", []string{NodeWipe}, true, loadtest.Breaks},
		{"redlock+fence", FaultKinds, true, loadtest.Holds},
		// A promoted replica lacks the lease: restart awareness sees its
		// data are new, without it the node votes at once; a single-node
		// rung has nothing else; the store fences both fenced rungs.
		{"redlock", []string{NodeFailover}, false, loadtest.Holds},
		{"redlock", []string{NodeFailover}, true, loadtest.Breaks},
		{"lua", []string{NodeFailover}, false, loadtest.Breaks},
		{"get-del", []string{NodeFailover, NodeCrash}, false, loadtest.Breaks},
		{"lua+fence", []string{NodeFailover}, true, loadtest.Holds},
		{"setnx-expire", []string{NodeFailover}, false, loadtest.Breaks},
		// Rungs that claim nothing under the nemesis.
		{"lua+check", FaultKinds, false, loadtest.NoClaim},
		{"db-guard", FaultKinds, false, loadtest.NoClaim},
		{"attendee", FaultKinds, false, loadtest.NoClaim},
		{"no-such-rung", FaultKinds, false, loadtest.NoClaim},
	} {
		if got, _ := Expected(tc.variant, tc.kinds, tc.unaware); got != tc.want {
			t.Errorf("%s under %v (unaware %v): %s, want %s", tc.variant, tc.kinds, tc.unaware, got, tc.want)
		}
	}
}

// The ladder declares what each rung does under the nemesis; every fault
// kind it names must be one the nemesis has, or a typo there would quietly
// turn a breaker into a promise to hold.
func TestLadderNamesFaultKinds(t *testing.T) {
	for _, r := range curriculum.Lessons() {
		if r.Chaos == nil {
			continue
		}
		for _, k := range slices.Concat(r.Chaos.Breakers, r.Chaos.Unaware) {
			if k != curriculum.AnyFault && !slices.Contains(FaultKinds, k) {
				t.Errorf("%s: the ladder names fault kind %q, not one of %v", r.Name, k, FaultKinds)
			}
		}
	}
}

// Expected reports the run's kinds that can break a rung, in the run's
// order, and nothing for one that breaks on concurrency alone.
func TestChaosExpectedBreakers(t *testing.T) {
	for _, tc := range []struct {
		variant string
		kinds   []string
		unaware bool
		want    []string
	}{
		{"redlock", []string{NodeFailover, AppPause, NodeWipe, NodeFlush}, false, []string{AppPause}},
		{"redlock", []string{NodeFailover, AppPause, NodeWipe, NodeFlush}, true, []string{NodeFailover, AppPause, NodeWipe, NodeFlush}},
		{"setnx-expire", []string{NodePause, AppCrash}, false, []string{NodePause, AppCrash}},
		{"none", FaultKinds, false, nil},
	} {
		if _, got := Expected(tc.variant, tc.kinds, tc.unaware); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s under %v (unaware %v): breakers %v, want %v", tc.variant, tc.kinds, tc.unaware, got, tc.want)
		}
	}
}
