package lock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"flashsale/lock/internal/wire"
)

// A vote counts for the incarnation it was sent to, and a connection to an
// incarnation already replaced, met late (its handshake's reply processed
// after the new one's), changes nothing: the node's state must not go back
// to the old run_id, which would un-seed the new one and refuse votes a
// legitimate holder got.
func TestLateMeetOfAReplacedIncarnation(t *testing.T) {
	cfg := defaultConfig()
	cfg.notifications = false
	cfg.ttl = 500 * time.Millisecond
	n := &node{addr: "node", cfg: cfg, ctx: context.Background()}
	info := func(id string, up int) string { return fmt.Sprintf("run_id:%s\r\nuptime_in_seconds:%d\r\n", id, up) }
	meet := func(id string, up int) {
		t.Helper()
		if err := n.meet(info(id, up), dataAge{}, id, 0, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	later := func() time.Time { return time.Now().Add(2 * time.Second) } // past any sit-out of a 500 ms TTL

	meet("old", 3600)
	if !n.counts("old", later()) {
		t.Fatal("an old, seeded incarnation does not count")
	}
	meet("new", 0) // restarted, and already seeded by another client
	if n.counts("old", later()) {
		t.Error("a vote sent to the replaced incarnation counts")
	}
	if !n.counts("new", later()) {
		t.Fatal("the new incarnation does not count once its sit-out is over")
	}
	meet("old", 3600) // a late handshake of a connection to the old one
	if !n.counts("new", later()) || n.counts("old", later()) {
		t.Error("a late meet of the replaced incarnation turned the node's state back")
	}
	if n.counts("new", time.Now()) {
		t.Error("the new incarnation counts before its sit-out is over")
	}
}

// A vote's marker check (restart_check.go) keeps the vote only while the
// node's marker names the birth its connection met; a connection that met
// no marker, or a check the node refused, cannot tell. A failed check
// keeps the node out of quorums for the sit-out.
func TestMarkerCheck(t *testing.T) {
	tag := connTag("abc", 1700000000123, true)
	for _, tc := range []struct {
		name string
		tag  string
		v    any
		kept bool
	}{
		{"the same birth", tag, "abc 1700000000123", true},
		{"flushed: no marker", tag, nil, false},
		{"flushed and marked again", tag, "abc 1700000009999", false},
		{"another server's marker", tag, "def 1700000000123", false},
		{"a marker not in the expected form", tag, "abc", false},
		{"the check refused", tag, wire.ServerError("NOPERM"), true},
		{"the connection met no marker", connTag("abc", 0, false), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.ttl = 500 * time.Millisecond
			n := &node{addr: "node", cfg: cfg, ctx: t.Context(), pipe: wire.NewPipe(wire.Config{Addr: "node"})}
			n.inc.runID, n.inc.seededFor = "abc", "abc"
			n.inc.reseeding = true // as if a re-seed loop ran: this node has no peers to re-seed from
			if got := n.kept(tc.tag, tc.v); got != tc.kept {
				t.Fatalf("kept = %v, want %v", got, tc.kept)
			}
			if counts := n.counts(tc.tag, time.Now()); counts != tc.kept {
				t.Errorf("the node counts %v after the check, want %v", counts, tc.kept)
			}
			if tc.kept {
				return
			}
			n.inc.reseed = false // re-seeded: only the sit-out is left
			if n.counts(tc.tag, time.Now().Add(sitOut(cfg.ttl)-10*time.Millisecond)) {
				t.Error("the node counts before the sit-out after the check is over")
			}
			if !n.counts(tc.tag, time.Now().Add(sitOut(cfg.ttl)+time.Second)) {
				t.Error("the node still does not count after the sit-out")
			}
		})
	}
}
