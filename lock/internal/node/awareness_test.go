package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"flashsale/lock/internal/wire"
)

func infoOf(id string, uptime int) string {
	return fmt.Sprintf("run_id:%s\r\nuptime_in_seconds:%d\r\n", id, uptime)
}

// sitOut is the tests' sit-out: the TTL and a margin, as the lock's.
func sitOut(ttl time.Duration) time.Duration { return ttl + ttl/100 + 2*time.Millisecond }

// testNode is a node that dials nothing, with restart awareness on.
func testNode(ctx context.Context, ttl time.Duration) *Node {
	return newNode(ctx, "node", &Config{TTL: ttl, Timeout: 100 * time.Millisecond, RestartAware: true, SitOut: sitOut})
}

// A node's awareness, one transition at a time (awareness.go). The clock is
// the test's: every event carries its own now.
func TestAwarenessTransitions(t *testing.T) {
	const ttl = time.Second
	t0 := time.Now()
	old := func(at time.Time, seeded string) reading { // a node up for an hour, data as old
		return reading{at: at, info: infoOf("abc", 3600), age: dataAge{d: time.Hour, known: true}, birth: 1000, seeded: seeded}
	}
	// flushed is a reading of the same process after a flush at t0 − age:
	// its data were marked anew.
	flushed := func(at time.Time, age time.Duration) reading {
		rd := old(at, "")
		rd.age, rd.birth = dataAge{d: age, known: true}, 1000+time.Hour.Milliseconds()
		return rd
	}
	after := t0.Add(sitOut(ttl) + time.Second)
	// checkedLost: met voting, then a vote's marker check finds the data replaced.
	checkedLost := func(inc *incarnation) error {
		if _, err := inc.met(old(t0, "abc"), ttl, t0); err != nil {
			return err
		}
		inc.lost(connTag("abc", 1000, "0", true), ttl, t0)
		return nil
	}
	for _, tc := range []struct {
		name   string
		events func(inc *incarnation) error
		at     time.Time
		want   awareState
	}{
		{"unmet", func(*incarnation) error { return nil }, t0, unmet},
		{"unmet → voting: old data, counters seeded", func(inc *incarnation) error {
			_, err := inc.met(old(t0, "abc"), ttl, t0)
			return err
		}, t0, voting},
		{"unmet → unseeded: old data, counters not seeded for it", func(inc *incarnation) error {
			_, err := inc.met(old(t0, ""), ttl, t0)
			return err
		}, t0, unseeded},
		{"unmet → sitting out: a process just started", func(inc *incarnation) error {
			_, err := inc.met(reading{at: t0, info: infoOf("abc", 0), seeded: "abc"}, ttl, t0)
			return err
		}, t0, sittingOut},
		{"sitting out → voting: the sit-out passes", func(inc *incarnation) error {
			_, err := inc.met(reading{at: t0, info: infoOf("abc", 0), seeded: "abc"}, ttl, t0)
			return err
		}, after, voting},
		{"unmet → blind: INFO refused for good", func(inc *incarnation) error {
			_, err := inc.met(reading{at: t0, refused: []string{"INFO server: NOPERM"}}, ttl, t0)
			return err
		}, t0, blind},
		{"unseeded → voting: a re-seed that began after the last loss", func(inc *incarnation) error {
			if _, err := inc.met(old(t0, ""), ttl, t0); err != nil {
				return err
			}
			inc.seeded("abc", t0, ttl)
			return nil
		}, t0, voting},
		{"voting → sitting out: a vote's marker check finds the data replaced", checkedLost, t0, sittingOut},
		{"… and unseeded once the sit-out passed", checkedLost, after, unseeded},
		{"voting → sitting out: a meeting finds the data marked anew", func(inc *incarnation) error {
			if _, err := inc.met(old(t0, "abc"), ttl, t0); err != nil {
				return err
			}
			_, err := inc.met(flushed(t0.Add(time.Millisecond), 10*time.Millisecond), ttl, t0.Add(time.Millisecond))
			return err
		}, t0.Add(time.Millisecond), sittingOut},
		{"the same birth read with another delay is no loss", func(inc *incarnation) error {
			if _, err := inc.met(old(t0, "abc"), ttl, t0); err != nil {
				return err
			}
			rd := old(t0.Add(time.Second), "abc")
			rd.age.d -= 50 * time.Millisecond // the reply took 50 ms longer to arrive
			_, err := inc.met(rd, ttl, t0.Add(time.Second))
			return err
		}, t0.Add(time.Second), voting},
		{"a reading from before a recorded loss is stale and changes nothing", func(inc *incarnation) error {
			if _, err := inc.met(old(t0, "abc"), ttl, t0); err != nil {
				return err
			}
			inc.lost(connTag("abc", 1000, "0", true), ttl, t0.Add(2*time.Millisecond))
			// Read at t0+1ms, before the flush: the seeded marker still named
			// the incarnation. It must not cancel the re-seed the loss needs.
			_, err := inc.met(old(t0.Add(time.Millisecond), "abc"), ttl, t0.Add(3*time.Millisecond))
			if !errors.Is(err, errStaleReading) {
				return fmt.Errorf("met = %v, want errStaleReading", err)
			}
			return nil
		}, after, unseeded},
		{"control: a reading from after the loss is met (re-seeded by another client)", func(inc *incarnation) error {
			if _, err := inc.met(old(t0, "abc"), ttl, t0); err != nil {
				return err
			}
			inc.lost(connTag("abc", 1000, "0", true), ttl, t0.Add(2*time.Millisecond))
			rd := flushed(t0.Add(3*time.Millisecond), 0)
			rd.seeded = "abc"
			_, err := inc.met(rd, ttl, t0.Add(3*time.Millisecond))
			return err
		}, after, voting},
		{"a re-seed that began before a recorded loss changes nothing", func(inc *incarnation) error {
			if _, err := inc.met(old(t0, ""), ttl, t0); err != nil {
				return err
			}
			inc.lost(connTag("abc", 1000, "0", true), ttl, t0.Add(2*time.Millisecond))
			inc.seeded("abc", t0.Add(time.Millisecond), ttl)
			return nil
		}, after, unseeded},
		{"a late meeting of a replaced incarnation changes nothing", func(inc *incarnation) error {
			if _, err := inc.met(old(t0, "abc"), ttl, t0); err != nil {
				return err
			}
			if _, err := inc.met(reading{at: t0, info: infoOf("def", 0), seeded: "def"}, ttl, t0); err != nil {
				return err
			}
			_, err := inc.met(old(t0, "abc"), ttl, t0)
			return err
		}, t0, sittingOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inc := incarnation{sitOut: sitOut}
			if err := tc.events(&inc); err != nil {
				t.Fatal(err)
			}
			inc.mu.Lock()
			got := inc.state(tc.at)
			inc.mu.Unlock()
			if got != tc.want {
				t.Errorf("state = %v, want %v", got, tc.want)
			}
			if counts := inc.counts("", tc.at); counts != (tc.want == voting || tc.want == blind) {
				t.Errorf("counts = %v in state %v", counts, got)
			}
		})
	}
}

// A lost lease's TTL record: a loss sits the node out for the largest TTL
// this process learnt, and a re-seed that learns a larger one extends it.
func TestAwarenessSitsOutTheLargestTTL(t *testing.T) {
	inc := incarnation{sitOut: sitOut}
	t0 := time.Now()
	rd := reading{at: t0, info: infoOf("abc", 3600), age: dataAge{d: time.Hour, known: true}, birth: 1, seeded: "abc"}
	if _, err := inc.met(rd, time.Second, t0); err != nil {
		t.Fatal(err)
	}
	inc.lost(connTag("abc", 1, "0", true), time.Second, t0)
	inc.seeded("abc", t0.Add(time.Millisecond), 10*time.Second) // another client's TTL, learnt from the peers
	if inc.counts("", t0.Add(sitOut(time.Second)+time.Second)) {
		t.Error("the node counts once this client's TTL passed, before the largest in use")
	}
	if !inc.counts("", t0.Add(sitOut(10*time.Second)+time.Millisecond)) {
		t.Error("the node does not count after the largest TTL's sit-out")
	}
}

// The meeting's replies (meeting.go): an error the node may not give next
// time fails the connection; one it gives for good is noted and logged,
// unless the node answered it to this process before (an ACL changed since:
// it fails closed); an eviction policy that may drop lock keys fails it.
func TestMeetingReadsFailClosed(t *testing.T) {
	info := infoOf("abc", 3600)
	born := []any{int64(1000), int64(5000), "0"}
	for _, tc := range []struct {
		name    string
		replies []any
		err     error
		refused int
		told    bool // a meeting read everything on this node before
	}{
		{"every read answered", []any{info, "maxmemory_policy:noeviction\r\n", born, "abc", int64(2000)}, nil, 0, false},
		{"BUSY on INFO", []any{wire.ServerError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."), "", born, "abc", int64(2000)}, errNotReady, 0, false},
		{"LOADING on the data-birth script", []any{info, "", wire.ServerError("LOADING Redis is loading the dataset in memory"), nil, int64(0)}, errNotReady, 0, false},
		{"OOM on the TTL record", []any{info, "", born, "abc", wire.ServerError("OOM command not allowed when used memory > 'maxmemory'.")}, errNotReady, 0, false},
		{"an ACL without INFO and scripts", []any{wire.ServerError("NOPERM this user has no permissions to run the 'info' command"), wire.ServerError("NOPERM this user has no permissions to run the 'info' command"), wire.ServerError("NOPERM this user has no permissions to run the 'eval' command"), "abc", wire.ServerError("NOPERM this user has no permissions to run the 'eval' command")}, nil, 4, false},
		{"an ACL that took INFO away since", []any{wire.ServerError("NOPERM this user has no permissions to run the 'info' command"), "", born, "abc", int64(2000)}, errTakenAway, 0, true},
		{"a server without the INFO sections (miniredis)", []any{wire.ServerError("section (server) is not supported"), wire.ServerError("section (memory) is not supported"), wire.ServerError("ERR Error compiling script (new function): :2: section (server) is not supported"), nil, int64(2000)}, nil, 3, false},
		{"allkeys-lru", []any{info, "maxmemory:1073741824\r\nmaxmemory_policy:allkeys-lru\r\n", born, "abc", int64(2000)}, errEvicts, 0, false},
		{"volatile-ttl", []any{info, "maxmemory_policy:volatile-ttl\r\n", born, "abc", int64(2000)}, errEvicts, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(t.Context(), 2*time.Second)
			n.told.Store(tc.told)
			rd, err := n.read(time.Now(), tc.replies)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("read: %v, want %v", err, tc.err)
			}
			if len(rd.refused) != tc.refused {
				t.Errorf("refused %q, want %d", rd.refused, tc.refused)
			}
		})
	}
}
