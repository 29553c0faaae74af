package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"flashsale/internal/fault"
	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// A lease with a watchdog is lost, for its holder, the moment its last
// known validity has passed, whatever its watchdog is doing then: here
// every extend times out on a stalled node (not refused: the key may still
// be there, so the watchdog would try again at its next tick), and the
// holder must not write in between. The acquire's reply comes late, so the
// lease's validity (counted from the SET) ends well before the tick whose
// failed extend would mark it lost.
func TestLeaseLostOnceItsValidityPassedWhileExtendsTimeOut(t *testing.T) {
	testsupport.RequireRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := localredis.Start(ctx, 1, localredis.Options{}) // its own node: it is stalled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	const ttl = 600 * time.Millisecond
	e := newEnvOn(t, testsupport.Options(t, c), lock.Options{TTL: ttl, Watchdog: true, FastOff: true})
	setFaults(t, e, fault.Fault{Point: fault.AfterAcquireStep1, Action: fault.Pause, P: 1, MS: int(ttl / 6 / time.Millisecond)})
	lease := mustAcquire(t, e.locker(lock.Lua), "k", 5*time.Second)
	setFaults(t, e)
	if err := c.Nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Nodes[0].Resume() })
	if err := lease.Err(); err != nil {
		t.Fatalf("lease lost before its validity ran out: %v", err)
	}
	time.Sleep(time.Until(lease.ValidUntil())) // a point in time, not an event: nothing tells of it
	if err := lease.Err(); !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("Err() once the validity ran out, the extends timing out: %v, want ErrLockLost", err)
	}
	if err := lease.CheckBeforeWrite(ctx); !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("check before the write once the validity ran out: %v, want ErrLockLost", err)
	}
	select {
	case <-lease.Lost():
	case <-time.After(hangBound):
		t.Fatal("Lost() never closed for a lease whose validity ran out")
	}
}

// A holder paused past its validity with its watchdog frozen beside it
// learns at its check before the write that the lease is over, before
// the watchdog's tick (which waited out the pause) sends anything. A lease
// without a watchdog knows nothing after its grant: it still writes, as
// taught (long-work).
func TestPausedHolderWithAWatchdogFindsItsValidityOver(t *testing.T) {
	c := shared(t)
	const ttl = 300 * time.Millisecond
	for _, tc := range []struct {
		name     string
		watchdog bool
		refused  bool
	}{
		{"watchdog", true, true},
		{"no watchdog", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c, lock.Options{TTL: ttl, Watchdog: tc.watchdog})
			ctx := context.Background()
			lease := mustAcquire(t, e.locker(lock.Lua), "k", 5*time.Second)
			defer lease.Release(ctx)
			setFaults(t, e, fault.Fault{Point: fault.InCriticalSection, Action: fault.Pause, P: 1, MS: int(2 * ttl / time.Millisecond)})
			if err := lease.Checkpoint(ctx, fault.InCriticalSection); err != nil {
				t.Fatal(err)
			}
			setFaults(t, e)
			err := lease.CheckBeforeWrite(ctx)
			if got := errors.Is(err, lock.ErrLockLost); got != tc.refused {
				t.Fatalf("check before the write after a pause of 2 TTLs: %v, want refused = %v", err, tc.refused)
			}
			if !tc.refused && err != nil {
				t.Fatalf("check before the write: %v, want nil", err)
			}
		})
	}
}
