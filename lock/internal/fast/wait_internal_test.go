package fast

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
)

// A waiting room that opens while the previous one for the same key is
// still closing must stay subscribed, whichever of the two (un)subscribe
// calls reaches the node first. Here the closing room's call is held back
// until the new room has subscribed: its late UNSUBSCRIBE must not leave the
// new waiter without wake-ups.
func TestReopenedWaitingRoomStaysSubscribed(t *testing.T) {
	c := testsupport.Redis(t, 1, localredis.Options{})
	opts := testsupport.Options(t, c)
	w := newTestWaker(t, testConfig("w:"), newTestNode(t, opts[0], nil))
	raw := redis.NewClient(opts[0])
	defer raw.Close()
	ctx := context.Background()
	const key = "w:lock:k"
	channel := "__keyspace@0__:" + key

	old := w.Join(key, nil, false)
	held, release := make(chan struct{}), make(chan struct{})
	syncs := 0
	w.beforeSync = func(string) {
		if syncs++; syncs == 1 { // the closing room's sync
			close(held)
			<-release
		}
	}
	closed := make(chan struct{})
	go func() {
		w.Leave(key, old)
		close(closed)
	}()
	<-held
	room := w.Join(key, nil, false) // opens a new room; its sync runs first
	defer w.Leave(key, room)
	close(release)
	<-closed
	w.syncs.Wait()

	subs, err := raw.PubSubNumSub(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	if subs[channel] != 1 {
		t.Fatalf("%d subscriptions to the key's events while a waiter waits, want 1", subs[channel])
	}
	freed := w.current(room)
	if err := raw.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the key's deletion")
	}
}
