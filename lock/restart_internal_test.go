package lock

import (
	"context"
	"fmt"
	"testing"
	"time"
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
