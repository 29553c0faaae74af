package chaos

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"flashsale/loadtest"
)

// The schedule is the seed's: the same seed gives the same faults at the
// same moments, another seed others; it is bounded (no fault outlives the
// run, none overlaps another of its lane) and keeps the promises the
// expectations rest on (no wipe of node 0, clock jumps on a majority with
// node 0, partitions between two different instances).
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
		case NodeWipe, NodeFlush:
			if e.Nodes[0] == 0 {
				t.Errorf("%+v wipes node 0", e)
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
		if seen[k] == 0 {
			t.Errorf("two minutes of every fault kind had no %s", k)
		}
	}
	only := Schedule(7, d, ttl, []string{NodeCrash}, 3, 5)
	if len(only) == 0 || slices.ContainsFunc(only, func(e NemesisEvent) bool { return e.Kind != NodeCrash }) {
		t.Errorf("a schedule of node crashes only: %+v", only)
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
		// A flushed node keeps the instances' connections: awareness does
		// not see it until a new one. Without awareness a wiped node
		// votes at once too; fencing holds either way.
		{"redlock", []string{NodeFlush}, false, loadtest.Breaks},
		{"redlock", []string{NodeWipe}, true, loadtest.Breaks},
		{"redlock+fence", FaultKinds, true, loadtest.Holds},
	} {
		if got, _ := Expected(tc.variant, tc.kinds, tc.unaware); got != tc.want {
			t.Errorf("%s under %v (unaware %v): %s, want %s", tc.variant, tc.kinds, tc.unaware, got, tc.want)
		}
	}
}
