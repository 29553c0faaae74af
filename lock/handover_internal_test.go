package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
)

// handOverCluster is five nodes old enough to vote, shared by the tests
// of this file.
func handOverCluster(t *testing.T) []*redis.Options {
	t.Helper()
	c := testsupport.Redis(t, 5, localredis.Options{}) // aged: old enough to vote
	return testsupport.Options(t, c)
}

// votes waits until a quorum of the nodes votes for ls.
func votes(t *testing.T, ls *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ls.Ping(ctx) != nil {
		if ctx.Err() != nil {
			t.Fatal("the nodes never voted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A release with a waiter of the same process passes the lease to it in one
// step: the key never goes free in between (no delete event on any node),
// the waiter holds it under its own value, counted from the hand-over, and
// a fenced lease carries a larger token than the one before it.
func TestReleaseHandsTheLeaseToAWaiterHere(t *testing.T) {
	opts := handOverCluster(t)
	for _, variant := range []string{Lua, LuaFence, Redlock, RedlockFence} {
		t.Run(variant, func(t *testing.T) {
			ns := "h:" + variant + ":"
			ls, err := New(opts, Options{Namespace: ns, NodeTimeout: 100 * time.Millisecond, BackoffMin: 20 * time.Second, BackoffMax: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer ls.Close()
			l, _ := ls.Locker(variant)
			ctx := context.Background()
			votes(t, ls)
			holder, err := l.TryAcquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			key := ns + "lock:k"
			var events []*redis.PubSub
			for _, o := range opts {
				raw := redis.NewClient(o)
				defer raw.Close()
				ps := raw.Subscribe(ctx, "__keyspace@0__:"+key)
				defer ps.Close()
				if _, err := ps.Receive(ctx); err != nil { // the subscription is confirmed
					t.Fatal(err)
				}
				events = append(events, ps)
			}
			got := make(chan *Lease, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				lease, err := l.Acquire(wctx, "k")
				if err != nil {
					t.Error(err)
				}
				got <- lease
			}()
			for !ls.wake.Waiting(key) {
				time.Sleep(time.Millisecond)
			}
			released := time.Now()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			next := <-got
			if next == nil {
				t.FailNow()
			}
			defer next.Release(ctx)
			for i, ps := range events {
				for {
					m, err := ps.ReceiveTimeout(ctx, 50*time.Millisecond)
					if err != nil {
						break // no more events
					}
					if msg, ok := m.(*redis.Message); ok && msg.Payload == "del" {
						t.Errorf("node %d: the key was deleted between the holders", i)
					}
				}
			}
			first := ls.nodes[0].Client()
			if v, err := first.Get(ctx, key).Result(); err != nil || v != next.Owner() {
				t.Errorf("the key carries %q (%v), want the new holder's value", v, err)
			}
			if next.ValidUntil().Before(released.Add(l.cfg.ttl - drift(l.cfg.ttl) - time.Second)) {
				t.Errorf("the new lease is valid until %v, want about a TTL after the hand-over at %v", next.ValidUntil(), released)
			}
			if t1, fenced := next.Token(); fenced {
				if t0, _ := holder.Token(); t1 <= t0 {
					t.Errorf("token %d after %d: a handed-over lease must draw a larger one", t1, t0)
				}
			}
		})
	}
}

// A lease handed over just as the last waiter here gave up is not stranded:
// whether it reached the room before the room closed or after, it is given
// back, and the key is free again within moments, not at the end of its TTL.
func TestHandOverToAClosedRoomIsGivenBack(t *testing.T) {
	opts := handOverCluster(t)
	for _, variant := range []string{Lua, Redlock} {
		for _, when := range []string{"before", "after"} {
			t.Run(variant+"/closes "+when, func(t *testing.T) {
				ns := "c:" + variant + ":" + when + ":"
				ls, err := New(opts, Options{Namespace: ns, NodeTimeout: 100 * time.Millisecond, TTL: 10 * time.Second, RestartAwarenessOff: true}) // nodes younger than this TTL vote too
				if err != nil {
					t.Fatal(err)
				}
				defer ls.Close()
				l, _ := ls.Locker(variant)
				ctx := context.Background()
				holder, err := l.TryAcquire(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				key := ns + "lock:k"
				kw := ls.wake.Join(key, l, true)
				if when == "before" {
					ls.wake.Leave(key, kw)
				}
				if !holder.handOver(ctx, l.v.(handingOver), kw) {
					t.Fatal("the lease did not pass")
				}
				if when == "after" {
					ls.wake.Leave(key, kw)
				}
				first := ls.nodes[0].Client()
				deadline := time.Now().Add(2 * time.Second)
				for {
					err := first.Get(ctx, key).Err()
					if errors.Is(err, redis.Nil) {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("the key is still held 2 s after nobody was left to take it (TTL 10 s): %v", err)
					}
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
	}
}
