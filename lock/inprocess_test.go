package lock_test

import (
	"context"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// The embedded default falls back to in-process nodes (miniredis) where
// redis-server is missing: no INFO run_id, no keyspace notifications, so
// the app runs them without restart awareness (a node that cannot tell its
// incarnation never votes with it on). Every correct variant must still
// take, refuse, give back and hand over a lock there, waking waiters by the
// backoff alone.
func TestInProcessNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := localredis.Start(ctx, 3, localredis.Options{InProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	e := newEnvOn(t, testsupport.Options(t, c), lock.Options{TTL: time.Second, RestartAwarenessOff: true})
	for _, name := range []string{lock.Lua, lock.LuaFence, lock.Redlock, lock.RedlockFence} {
		t.Run(name, func(t *testing.T) {
			l := e.locker(name)
			first := mustAcquire(t, l, name, 2*time.Second)
			if _, err := l.TryAcquire(ctx, name); !isBusy(err) {
				t.Fatalf("second acquire while held: got %v, want ErrNotAcquired", err)
			}
			got := acquireAsync(ctx, t, l, name, 10*time.Second)
			if err := first.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			second := <-got
			if second == nil {
				return
			}
			if ta, fenced := first.Token(); fenced {
				if tb, _ := second.Token(); tb <= ta {
					t.Errorf("token %d after %d, want strictly increasing", tb, ta)
				}
			}
			if err := second.Release(ctx); err != nil {
				t.Errorf("release of the waiter's lease: %v", err)
			}
		})
	}
}
