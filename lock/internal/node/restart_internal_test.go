package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"flashsale/internal/databirth"
	"flashsale/lock/internal/wire"
)

// A vote counts for the incarnation it was sent to, and a connection to an
// incarnation already replaced, met late (its meeting's reply processed
// after the new one's), changes nothing: the node's state must not go back
// to the old run_id, which would un-seed the new one and refuse votes a
// legitimate holder got.
func TestLateMeetOfAReplacedIncarnation(t *testing.T) {
	n := testNode(context.Background(), 500*time.Millisecond)
	meet := func(id string, up int) {
		t.Helper()
		if err := n.record(reading{at: time.Now(), info: infoOf(id, up), seeded: seededFor(id, 0)}, true); err != nil {
			t.Fatal(err)
		}
	}
	later := func() time.Time { return time.Now().Add(2 * time.Second) } // past any sit-out of a 500 ms TTL

	meet("old", 3600)
	if !n.Counts("old", later()) {
		t.Fatal("an old, seeded incarnation does not count")
	}
	meet("new", 0) // restarted, and already seeded by another client
	if n.Counts("old", later()) {
		t.Error("a vote sent to the replaced incarnation counts")
	}
	if !n.Counts("new", later()) {
		t.Fatal("the new incarnation does not count once its sit-out is over")
	}
	meet("old", 3600) // a late meeting on a connection to the old one
	if !n.Counts("new", later()) || n.Counts("old", later()) {
		t.Error("a late meet of the replaced incarnation turned the node's state back")
	}
	if n.Counts("new", time.Now()) {
		t.Error("the new incarnation counts before its sit-out is over")
	}
}

// A vote's checks (restart_check.go) keep the vote only while the node's
// marker is the one its connection met and its operator ledger has not
// moved and its total of calls has not gone back (a reset of the counts);
// a failed check keeps the node out of quorums for the sit-out. A check the
// node does not answer, for now or for good (an ACL that took a command
// away), does not count but is no loss.
func TestMarkerCheck(t *testing.T) {
	stats := func(flushall, configSet int) string {
		return fmt.Sprintf("# Commandstats\r\ncmdstat_get:calls=9,usec=1\r\ncmdstat_flushall:calls=%d,usec=1\r\ncmdstat_config|set:calls=%d,usec=2\r\n", flushall, configSet)
	}
	ledger, calls := databirth.Ledger(stats(0, 1))
	tag := connTag("abc", 1700000000123, ledger)
	nopermGet := wire.ServerError("NOPERM this user has no permissions to run the 'get' command")
	for _, tc := range []struct {
		name          string
		tag           string
		marker, stats any
		seen          int64 // the largest total of calls read before
		kept, lost    bool
	}{
		{"the same birth and ledger", tag, tag, stats(0, 1), 0, true, false},
		{"flushed: no marker", tag, nil, stats(0, 1), 0, false, true},
		{"flushed and marked again", tag, "abc 1700000009999 " + ledger, stats(0, 1), 0, false, true},
		{"another server's marker", tag, "def 1700000000123 " + ledger, stats(0, 1), 0, false, true},
		{"a marker not in the expected form", tag, "abc 1700000000123", stats(0, 1), 0, false, true},
		{"an operator command since (CONFIG SET)", tag, tag, stats(0, 2), 0, false, true},
		{"an operator command since (FLUSHALL, the marker put back)", tag, tag, stats(1, 1), 0, false, true},
		{"the counts reset (CONFIG RESETSTAT)", tag, tag, "# Commandstats\r\ncmdstat_config|resetstat:calls=1,usec=1\r\n", 0, false, true},
		{"the counts reset and the ledger read the same again", tag, tag, stats(0, 1), calls + 1, false, true},
		{"the counts grew", tag, tag, stats(0, 1), calls - 1, true, false},
		{"the marker check refused for good", tag, nopermGet, stats(0, 1), 0, false, false},
		{"the ledger check refused for good", tag, tag, wire.ServerError("NOPERM this user has no permissions to run the 'info' command"), 0, false, false},
		{"the check refused for now", tag, wire.ServerError("LOADING Redis is loading the dataset in memory"), stats(0, 1), 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ttl = 500 * time.Millisecond
			n := testNode(t.Context(), ttl)
			n.pipe = wire.NewPipe(wire.Config{Addr: "node"})
			n.inc.runID, n.inc.birth, n.inc.calls = "abc", 1700000000123, tc.seen
			n.inc.seededFor = seededFor("abc", n.inc.birth)
			n.inc.reseeding = true // as if a re-seed loop ran: this node has no peers to re-seed from
			if got := n.kept(tc.tag, tc.marker, tc.stats); got != tc.kept {
				t.Fatalf("kept = %v, want %v", got, tc.kept)
			}
			if counts := n.Counts(tc.tag, time.Now()); counts == tc.lost {
				t.Errorf("the node counts %v after the check, want %v", counts, !tc.lost)
			}
			if !tc.lost {
				return
			}
			n.inc.reseed = false // re-seeded: only the sit-out is left
			if n.Counts(tc.tag, time.Now().Add(sitOut(ttl)-10*time.Millisecond)) {
				t.Error("the node counts before the sit-out after the check is over")
			}
			if !n.Counts(tc.tag, time.Now().Add(sitOut(ttl)+time.Second)) {
				t.Error("the node still does not count after the sit-out")
			}
		})
	}
}
