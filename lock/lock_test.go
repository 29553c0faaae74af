package lock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
	"flashsale/internal/taptest"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

func TestAcquireReleaseExtend(t *testing.T) {
	c := shared(t)
	for _, name := range lockRungs() {
		if name == ladder.None || name == ladder.Attendee {
			// attendee as shipped takes a held lock too (its flaw): the
			// matrix, not this test, is where it is measured.
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c, lock.Options{TTL: time.Second})
			l := e.locker(name)
			ctx := context.Background()

			// Redlock answers once the outcome is decided; the other nodes'
			// commands are already on the wire, so every node gets there.
			a := mustAcquire(t, l, "sku:1", 5*time.Second)
			for i := range nodesOf(name, len(e.raw)) {
				if ttl := e.await(i, "sku:1", time.Second, func(d time.Duration) bool { return d != -2 }); ttl <= 0 || ttl > time.Second {
					t.Errorf("node %d: lock TTL %v, want in (0, 1s]", i, ttl)
				}
			}
			if _, err := l.TryAcquire(ctx, "sku:1"); !isBusy(err) {
				t.Fatalf("second acquire while held: got %v, want ErrNotAcquired", err)
			}
			if _, err := l.TryAcquire(ctx, "sku:2"); err != nil {
				t.Fatalf("another key must be free: %v", err)
			}

			// Shorten the TTL behind the lock's back; Extend must restore it.
			// Short enough to tell from a restored TTL (below the 500 ms
			// asked of it), long enough that a loaded machine's stall before
			// the extend does not let the key expire first.
			for i := range nodesOf(name, len(e.raw)) {
				e.raw[i].PExpire(ctx, e.ns+"lock:sku:1", 400*time.Millisecond)
			}
			if err := a.Extend(ctx); err != nil {
				t.Fatalf("extend: %v", err)
			}
			for i := range nodesOf(name, len(e.raw)) {
				if ttl := e.await(i, "sku:1", time.Second, func(d time.Duration) bool { return d >= 500*time.Millisecond }); ttl < 500*time.Millisecond {
					t.Errorf("node %d: TTL after extend %v, want about 1s", i, ttl)
				}
			}
			if until := time.Until(a.ValidUntil()); until <= 0 || until > time.Second {
				t.Errorf("valid for %v after extend, want in (0, 1s]", until)
			}

			if err := a.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			for i := range nodesOf(name, len(e.raw)) {
				if ttl := e.await(i, "sku:1", time.Second, func(d time.Duration) bool { return d == -2 }); ttl != -2 {
					t.Errorf("node %d: lock still there after release (TTL %v)", i, ttl)
				}
			}
			b, err := l.TryAcquire(ctx, "sku:1")
			if err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			if ta, fenced := a.Token(); fenced {
				if tb, _ := b.Token(); tb <= ta {
					t.Errorf("fencing token went from %d to %d, want strictly increasing", ta, tb)
				}
			}
		})
	}
}

// A lease whose TTL ran out must not release or extend its successor's lock
// — where the variant claims an owner check. The broken ones show their flaw.
func TestStaleLease(t *testing.T) {
	c := shared(t)
	cases := []struct {
		name                   string
		checksOwnerOnRelease   bool
		checksOwnerOnExtension bool
	}{
		{ladder.SetNXExpire, false, false},
		{ladder.GetDel, true, false}, // the check is there, but not atomic with the DEL
		{ladder.PlainDel, false, false},
		{lock.Lua, true, true},
		{lock.LuaFence, true, true},
		{lock.Redlock, true, true},
		{lock.RedlockFence, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c, lock.Options{TTL: 200 * time.Millisecond})
			l := e.locker(tc.name)
			ctx := context.Background()
			stale := mustAcquire(t, l, "k", time.Second)
			e.waitGone(0, "k", 2*time.Second)
			successor := mustAcquire(t, l, "k", 2*time.Second)

			err := stale.Extend(ctx)
			if tc.checksOwnerOnExtension && !errors.Is(err, lock.ErrNotHeld) {
				t.Errorf("stale extend: got %v, want ErrNotHeld", err)
			}
			if !tc.checksOwnerOnExtension && err != nil {
				t.Errorf("stale extend of an unchecked variant renews whatever is there; got %v", err)
			}

			err = stale.Release(ctx)
			_, busy := l.TryAcquire(ctx, "k")
			if tc.checksOwnerOnRelease {
				if !errors.Is(err, lock.ErrNotHeld) {
					t.Errorf("stale release: got %v, want ErrNotHeld", err)
				}
				if !isBusy(busy) {
					t.Errorf("after a stale release the successor's lock must stand; acquire got %v", busy)
				}
			} else if busy != nil {
				t.Errorf("a stale plain DEL deletes the successor's lock, so a third client gets in; acquire got %v", busy)
			}
			_ = successor.Release(ctx)
		})
	}
}

// Thirty-two clients fight for ONE key. Inside the section each reads a
// shared counter, yields, and writes it back plus one: a second holder shows
// up as an overlap and as a lost increment.
func TestOneKeyManyClients(t *testing.T) {
	c := shared(t)
	const clients, rounds = 32, 8
	for _, name := range lockRungs() {
		if name == ladder.ArticleRedlock {
			// Its quorum of 2 of 5 lets two clients in at once when their
			// SETs interleave, which they may or may not here: the
			// matrix's clean column is where it is measured.
			continue
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, c, lock.Options{TTL: 2 * time.Second})
			l := e.locker(name)
			var counter, holders, overlaps, lostReleases, lastToken, staleTokens atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, clients*rounds)
			for range clients {
				wg.Go(func() {
					for range rounds {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						lease, err := l.Acquire(ctx, "hot")
						cancel()
						if err != nil {
							errs <- err
							return
						}
						if holders.Add(1) > 1 {
							overlaps.Add(1)
						}
						if token, fenced := lease.Token(); fenced {
							// Grant after grant, tokens grow: leases handed
							// straight to a waiter here draw theirs too.
							if int64(token) <= lastToken.Swap(int64(token)) {
								staleTokens.Add(1)
							}
						}
						v := counter.Load()
						runtime.Gosched()
						time.Sleep(100 * time.Microsecond) // the business work
						counter.Store(v + 1)
						holders.Add(-1)
						if err := lease.Release(context.Background()); err != nil {
							if errors.Is(err, lock.ErrNotHeld) {
								lostReleases.Add(1) // someone else's release freed it: a lock that broke
								continue
							}
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("client error: %v", err)
			}
			if staleTokens.Load() > 0 {
				t.Errorf("%d grants carried a token no larger than the grant before", staleTokens.Load())
			}
			broke := overlaps.Load() > 0 || counter.Load() != clients*rounds || lostReleases.Load() > 0
			t.Logf("%s: %d overlaps, counter %d of %d", name, overlaps.Load(), counter.Load(), clients*rounds)
			// attendee as shipped grants a held lock (its flaw to spot).
			if want := name == ladder.None || name == ladder.Attendee; broke != want {
				t.Errorf("broke = %v, want %v (overlaps %d, counter %d of %d)", broke, want, overlaps.Load(), counter.Load(), clients*rounds)
			}
		})
	}
}

// A waiter is woken by the release itself: the fallback backoff here is far
// longer than the wait budget, so only the keyspace notification can make
// this acquire succeed.
func TestWaiterWokenByRelease(t *testing.T) {
	c := shared(t)
	for _, name := range []string{lock.Lua, lock.Redlock, ladder.GetDel} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Restart awareness off: with a 30 s TTL it would keep nodes younger
			// than that out of every quorum, and this test is about wake-ups.
			e := newEnv(t, c, lock.Options{TTL: 30 * time.Second, BackoffMin: time.Minute, BackoffMax: time.Minute, RestartAwarenessOff: true})
			l := e.locker(name)
			held := mustAcquire(t, l, "k", time.Second)
			tried := make(chan struct{})
			got := make(chan error, 1)
			go func() {
				// First try fails (held), then the waiter sleeps for a wake-up.
				if _, err := l.TryAcquire(context.Background(), "k"); !isBusy(err) {
					got <- err
					return
				}
				close(tried)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				lease, err := l.Acquire(ctx, "k")
				if err == nil {
					err = lease.Release(context.Background())
				}
				got <- err
			}()
			<-tried
			// Release only once the waiter listens for the key's events.
			channel := "__keyspace@0__:" + e.ns + "lock:k"
			for {
				n, err := e.raw[0].PubSubNumSub(context.Background(), channel).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n[channel] > 0 {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			if err := held.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter: %v", err)
			}
		})
	}
}

// Waiters in one process take about one try per release: the delete event
// that echoes the release which let the current holder in wakes nobody, and
// a waiter behind a lease held here sleeps until that lease's release.
// (Before both, a hot Redlock key cost 2.5 tries per acquire.)
func TestWaitersTryOncePerRelease(t *testing.T) {
	c := shared(t)
	for _, name := range []string{lock.Lua, lock.Redlock} {
		t.Run(name, func(t *testing.T) {
			var tries, acquired atomic.Int64
			e := newEnv(t, c, taptest.Observed(lock.Options{}, func(ev locktap.Event) {
				if ev.Kind == locktap.Acquired {
					tries.Add(int64(ev.Tries))
					acquired.Add(1)
				}
			}))
			l := e.locker(name)
			const clients, rounds = 16, 15
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for range rounds {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						lease, err := l.Acquire(ctx, "hot")
						cancel()
						if err != nil {
							t.Error(err)
							return
						}
						time.Sleep(time.Millisecond) // the work inside the section
						if err := lease.Release(context.Background()); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			per := float64(tries.Load()) / float64(max(acquired.Load(), 1))
			t.Logf("%.2f tries per acquire over %d acquires", per, acquired.Load())
			if per > 1.5 {
				t.Errorf("%.2f tries per acquire, want at most 1.5: waiters are woken when the lock cannot be free", per)
			}
		})
	}
}

func TestAcquireGivesUpWithContext(t *testing.T) {
	e := newEnv(t, shared(t), lock.Options{TTL: 10 * time.Second})
	l := e.locker(lock.Lua)
	held := mustAcquire(t, l, "k", time.Second)
	defer held.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := l.Acquire(ctx, "k")
	if !errors.Is(err, lock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrNotAcquired joined with DeadlineExceeded", err)
	}
}

func TestWatchdog(t *testing.T) {
	c := shared(t)
	// Extends every TTL/3 under a TTL/3 timeout: short enough for a quick
	// test, long enough that a busy machine's scheduling is not a lost lease.
	const ttl = 600 * time.Millisecond
	for _, name := range []string{lock.Lua, lock.Redlock, lock.RedlockFence} {
		t.Run(name+"/keeps", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c, lock.Options{TTL: ttl, Watchdog: true})
			l := e.locker(name)
			lease := mustAcquire(t, l, "k", time.Second)
			time.Sleep(4 * ttl) // work for several TTLs; the watchdog must carry the lease
			if other, err := l.TryAcquire(context.Background(), "k"); err == nil {
				_ = other.Release(context.Background())
				t.Fatal("lease expired under its watchdog: another client acquired it")
			}
			if err := lease.Err(); err != nil {
				t.Fatalf("lease reported lost: %v", err)
			}
			if err := lease.Release(context.Background()); err != nil {
				t.Fatalf("release: %v", err)
			}
		})
		t.Run(name+"/paused-holder-loses", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c, lock.Options{TTL: ttl, Watchdog: true})
			l := e.locker(name)
			holder := mustAcquire(t, l, "k", time.Second)
			if err := e.faults.Set(1, []fault.Fault{{Point: fault.InCriticalSection, Action: fault.Pause, P: 1, MS: int(3 * ttl / time.Millisecond)}}); err != nil {
				t.Fatal(err)
			}
			paused := make(chan error, 1)
			go func() { paused <- holder.Checkpoint(context.Background(), fault.InCriticalSection) }()
			// The pause freezes the watchdog too, so the lease expires and a
			// successor gets in.
			successor := mustAcquire(t, l, "k", 5*time.Second)
			defer successor.Release(context.Background())
			if err := <-paused; err != nil {
				t.Fatal(err)
			}
			select {
			case <-holder.Lost():
			case <-time.After(5 * time.Second):
				t.Fatal("watchdog did not report the lost lease")
			}
			if !errors.Is(holder.Err(), lock.ErrLockLost) {
				t.Fatalf("lease error %v, want ErrLockLost", holder.Err())
			}
		})
	}
}

func TestUnknownVariant(t *testing.T) {
	e := newEnv(t, shared(t))
	if _, err := e.ls.Locker("setnx"); !errors.Is(err, lock.ErrUnknownVariant) {
		t.Fatalf("got %v, want ErrUnknownVariant", err)
	}
}

// A lease's validity is counted from the moment its first command was
// sent, for every rung, and once: a single node's lease ends a TTL after
// that, a Redlock lease a TTL less the drift allowance after it (the page's
// TTL − elapsed − drift, counted from the end of the acquire, is the same
// instant). Subtracting the time the acquire took from a validity that is
// then added to the start time again would end it early.
func TestValidityCountsFromTheFirstCommand(t *testing.T) {
	const ttl = 2 * time.Second
	drift := lock.MinUptime(ttl) - time.Second - ttl
	e := newEnv(t, shared(t), lock.Options{TTL: ttl})
	e.voting()
	ctx := context.Background()
	for _, tc := range []struct {
		variant string
		valid   time.Duration // from the first command
	}{
		{lock.Lua, ttl},
		{lock.LuaFence, ttl},
		{lock.Redlock, ttl - drift},
		{lock.RedlockFence, ttl - drift},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			l := e.locker(tc.variant)
			before := time.Now()
			lease, err := l.TryAcquire(ctx, "v")
			after := time.Now()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lease.Release(ctx) }()
			if got := lease.ValidUntil(); got.Before(before.Add(tc.valid)) || got.After(after.Add(tc.valid)) {
				t.Errorf("valid until acquire start + %v, want between %v and %v (the acquire took %v)",
					got.Sub(before), tc.valid, after.Add(tc.valid).Sub(before), after.Sub(before))
			}
			before = time.Now()
			err = lease.Extend(ctx)
			after = time.Now()
			if err != nil {
				t.Fatal(err)
			}
			if got := lease.ValidUntil(); got.Before(before.Add(tc.valid)) || got.After(after.Add(tc.valid)) {
				t.Errorf("after extend valid until extend start + %v, want between %v and %v",
					got.Sub(before), tc.valid, after.Add(tc.valid).Sub(before))
			}
		})
	}
}
