package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"flashsale/lock"
	"flashsale/lock/ladder"
)

// A holder whose watchdog found its lease lost does not write, whatever
// its rung: the process knows, and the check before the write says so. (A
// lease lost while nobody noticed is another matter, and the rungs that
// check nothing still write then, as taught.)
func TestCheckBeforeWriteRefusesALeaseTheWatchdogLost(t *testing.T) {
	c := shared(t)
	for _, variant := range []string{lock.Lua, lock.Redlock, ladder.LuaCheck} {
		t.Run(variant, func(t *testing.T) {
			e := newEnv(t, c, lock.Options{TTL: 600 * time.Millisecond, Watchdog: true})
			e.voting()
			ctx := context.Background()
			lease := mustAcquire(t, e.locker(variant), "k", 5*time.Second)
			defer lease.Release(ctx)
			// Another client's value in place of the holder's, on every
			// node: the watchdog's next extend finds the lease gone.
			for i := range nodesOf(variant, len(e.raw)) {
				if err := e.raw[i].Set(ctx, e.ns+"lock:k", "other", 10*time.Second).Err(); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-lease.Lost():
			case <-time.After(10 * time.Second):
				t.Fatal("the watchdog never found the lease lost")
			}
			if err := lease.CheckBeforeWrite(ctx); !errors.Is(err, lock.ErrLockLost) {
				t.Fatalf("check before the write of a lease the watchdog lost: want ErrLockLost, got %v", err)
			}
		})
	}
}
