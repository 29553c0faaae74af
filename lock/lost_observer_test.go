package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"flashsale/internal/locktap"
	"flashsale/internal/taptest"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// hangBound is how long a call that must answer at once may take before a
// test calls it stuck: far beyond any scheduling delay, far below the
// test binary's own timeout.
const hangBound = 10 * time.Second

// An observer may read the lease an event is about (the app's history
// records a lost lease with its validity), and a lease its watchdog lost
// must still answer its holder: the check before the write says lost, the
// release returns. attendee's flawed acquire lets a second client "acquire"
// a key that carries the first one's value, and its watchdog finds that
// out; lua's and redlock's leases are lost to another value put in place.
func TestLeaseLostUnderAnObserverThatReadsIt(t *testing.T) {
	c := shared(t)
	for _, variant := range []string{ladder.Attendee, lock.Lua, lock.Redlock} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			read := make(chan time.Time, 1)
			e := newEnv(t, c, taptest.Observed(lock.Options{TTL: 600 * time.Millisecond, Watchdog: true}, func(ev locktap.Event) {
				if ev.Kind == locktap.Lost {
					select {
					case read <- ev.Lease.ValidUntil():
					default:
					}
				}
			}))
			e.voting()
			ctx := context.Background()
			lease := lostLease(t, e, variant)
			select {
			case <-read:
			case <-time.After(hangBound):
				t.Fatal("the observer of a lost lease never got through reading it")
			}
			answer := make(chan error, 2)
			go func() {
				answer <- lease.CheckBeforeWrite(ctx)
				answer <- lease.Release(ctx)
			}()
			for _, step := range []string{"check before the write", "release"} {
				select {
				case err := <-answer:
					if step == "check before the write" && !errors.Is(err, lock.ErrLockLost) {
						t.Fatalf("%s of a lost lease: %v, want ErrLockLost", step, err)
					}
				case <-time.After(hangBound):
					t.Fatalf("the %s of a lost lease never answered", step)
				}
			}
		})
	}
}

// lostLease is a lease of variant on "k" that its watchdog is about to
// find lost.
func lostLease(t *testing.T, e *env, variant string) *lock.Lease {
	t.Helper()
	ctx := context.Background()
	l := e.locker(variant)
	first := mustAcquire(t, l, "k", 5*time.Second)
	if variant == ladder.Attendee {
		t.Cleanup(func() { _ = first.Release(ctx) })
		return mustAcquire(t, l, "k", 5*time.Second) // the flaw: "acquired" beside the first
	}
	for i := range nodesOf(variant, len(e.raw)) {
		if err := e.raw[i].Set(ctx, e.ns+"lock:k", "other", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return first
}
