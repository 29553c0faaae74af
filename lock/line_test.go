package lock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// Two sets of lockers stand for two app instances on one hot Redlock key:
// the key's line serves both, no section overlaps another, and neither
// instance is starved.
func TestLineServesEveryInstance(t *testing.T) {
	c := shared(t)
	a := newEnv(t, c)
	a.voting()
	b := a.instance()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var inside atomic.Int32
	var overlaps atomic.Int32
	grants := [2]atomic.Int32{}
	var wg sync.WaitGroup
	for i, ls := range []*lock.Client{a.ls, b} {
		l, _ := ls.Locker(lock.Redlock)
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					wctx, wcancel := context.WithTimeout(ctx, time.Second)
					lease, err := l.Acquire(wctx, "hot")
					wcancel()
					if err != nil {
						continue
					}
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(time.Millisecond) // the critical section
					inside.Add(-1)
					grants[i].Add(1)
					_ = lease.Release(context.Background())
				}
			})
		}
	}
	wg.Wait()
	ga, gb := grants[0].Load(), grants[1].Load()
	t.Logf("grants: %d and %d", ga, gb)
	if overlaps.Load() > 0 {
		t.Fatalf("%d overlapping sections", overlaps.Load())
	}
	if ga+gb < 20 {
		t.Fatalf("only %d grants in 2 s", ga+gb)
	}
	if min(ga, gb)*3 < max(ga, gb) {
		t.Errorf("one instance starved: %d and %d grants", ga, gb)
	}
}

// A process that stood in a key's line and died there must not hold the
// line up beyond the TTL: the release that wakes the dead head wakes nobody,
// and the waiter behind it comes in by its own timer.
func TestDeadHeadDoesNotStrandTheLine(t *testing.T) {
	c := testsupport.Redis(t, 5, localredis.Options{})
	e := newEnv(t, c)
	e.aged(c)
	l := e.locker(lock.Redlock)
	ctx := context.Background()
	holder := mustAcquire(t, l, "k", time.Second)

	// The dead process: it waits, joins the line, and dies there.
	dead, err := lock.New(testsupport.Options(t, c), ladder.With(lock.Options{Namespace: e.ns, NodeTimeout: 100 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	dl, _ := dead.Locker(lock.Redlock)
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := dl.Acquire(dctx, "k"); err == nil {
		t.Fatal("the dead process got a held lock")
	}
	dcancel()
	_ = dead.Close()

	// A live waiter elsewhere, behind the dead head.
	live := e.instance()
	ll, _ := live.Locker(lock.Redlock)
	got := make(chan error, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, l.TTL())
		defer wcancel()
		lease, err := ll.Acquire(wctx, "k")
		if err == nil {
			_ = lease.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // the live waiter is in the line by now
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter behind a dead head did not get the lock within the TTL: %v", err)
	}
}

// noTimers is a backoff so long that a waiter in these tests can only get
// the lock within its wait by a wake-up: the line's, or a delete event.
var noTimers = lock.Options{BackoffMin: 20 * time.Second, BackoffMax: 20 * time.Second}

// A holder that took the key uncontended does not know anyone waits, so its
// release does not ask the line; a process that joined the empty line while
// it held the key wakes at the key's delete event all the same.
func TestUnseenWaiterWakesAtRelease(t *testing.T) {
	c := shared(t)
	for _, variant := range []string{lock.Lua, lock.Redlock} {
		t.Run(variant, func(t *testing.T) {
			a := newEnv(t, c)
			a.voting()
			bl := a.instance(noTimers)
			ctx := context.Background()
			holder := mustAcquire(t, a.locker(variant), "k", time.Second)
			waiter, _ := bl.Locker(variant)
			got := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				lease, err := waiter.Acquire(wctx, "k")
				if err == nil {
					_ = lease.Release(ctx)
				}
				got <- err
			}()
			a.queued("k", 2*time.Second)
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiter was not woken by the release: %v", err)
			}
		})
	}
}

// Waiting processes in a key's line do not listen for its delete events:
// the line wakes them, and hearing every release of a hot key would cost
// each waiting process a wake-up per grant. Only the head of a line that was
// empty when it joined listens, since the holder may not know it waits. And
// both waiters still get the lock: the head by the delete, the other by the
// line.
func TestOnlyTheHeadOfAnEmptyLineListens(t *testing.T) {
	c := shared(t)
	for _, variant := range []string{lock.Lua, lock.Redlock} {
		t.Run(variant, func(t *testing.T) {
			a := newEnv(t, c)
			a.voting()
			ctx := context.Background()
			holder := mustAcquire(t, a.locker(variant), "k", time.Second)
			got := make(chan error, 2)
			for i := range 2 {
				ls := a.instance(noTimers)
				l, _ := ls.Locker(variant)
				go func() {
					wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					defer cancel()
					lease, err := l.Acquire(wctx, "k")
					if err == nil {
						time.Sleep(time.Millisecond) // the critical section
						err = lease.Release(ctx)
					}
					got <- err
				}()
				a.inLine("k", int64(i+1), 2*time.Second)
			}
			channel := "__keyspace@0__:" + a.ns + "lock:k"
			subs, err := a.raw[0].PubSubNumSub(ctx, channel).Result()
			if err != nil {
				t.Fatal(err)
			}
			if subs[channel] != 1 {
				t.Errorf("%d processes listen for the key's events while two stand in its line, want 1 (the head)", subs[channel])
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := <-got; err != nil {
					t.Fatalf("a waiter in line was not woken: %v", err)
				}
			}
		})
	}
}

// When a process passes the key to the next process in line, its own
// waiters, asleep behind its lease, must keep a place in the line: else
// nothing wakes them but their timers (a lease's validity, here longer than
// the wait).
func TestStreakEndKeepsTheWaitersPlace(t *testing.T) {
	c := shared(t)
	for _, variant := range []string{lock.Lua, lock.Redlock} {
		t.Run(variant, func(t *testing.T) {
			a := newEnv(t, c, noTimers)
			a.voting()
			b := a.instance(noTimers)
			al := a.locker(variant)
			bl, err := b.Locker(variant)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for _, l := range []*lock.Locker{al, al, al, bl} {
				wg.Go(func() {
					for range 40 {
						wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
						lease, err := l.Acquire(wctx, "hot")
						cancel()
						if err != nil {
							errs <- err
							return
						}
						time.Sleep(time.Millisecond) // the critical section
						_ = lease.Release(context.Background())
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("a waiter was stranded: %v", err)
			}
		})
	}
}

// queued waits until some process stands in the key's line on the first node.
func (e *env) queued(key string, within time.Duration) {
	e.t.Helper()
	e.inLine(key, 1, within)
}

// inLine waits until at least n processes stand in the key's line.
func (e *env) inLine(key string, n int64, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := e.raw[0].LLen(context.Background(), e.ns+"line:"+key).Result()
		if err != nil {
			e.t.Fatalf("LLEN: %v", err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d of %d processes joined the line of %q within %v", got, n, key, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// ExpectedWait tells a newcomer how long the waiters already here will
// keep it: positive while clients queue for a hot key, and zero once nobody
// waits.
func TestExpectedWait(t *testing.T) {
	e := newEnv(t, shared(t))
	for _, variant := range []string{lock.Lua, lock.Redlock} {
		t.Run(variant, func(t *testing.T) {
			l := e.locker(variant)
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			defer cancel()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for ctx.Err() == nil {
						lease, err := l.Acquire(ctx, "hot")
						if err != nil {
							continue
						}
						time.Sleep(2 * time.Millisecond) // the critical section
						_ = lease.Release(context.Background())
					}
				})
			}
			var most time.Duration
			for ctx.Err() == nil {
				most = max(most, l.ExpectedWait("hot"))
				time.Sleep(5 * time.Millisecond)
			}
			wg.Wait()
			// Seven waiters behind 2 ms sections: some ms, far from seconds.
			if most <= 0 || most > time.Second {
				t.Errorf("expected wait while 8 clients queue: at most %v, want some ms", most)
			}
			if d := l.ExpectedWait("hot"); d != 0 {
				t.Errorf("expected wait with nobody waiting: %v, want 0", d)
			}
		})
	}
}

// A place in a key's line whose process gave up (stale) does not strand the
// process behind it: that one is not the line's head, so it does not hear
// the key's delete event, and a holder whose process never waited releases
// without asking the line. It still finds the key free within the line's
// slack, not at the end of its backoff (20 s here).
func TestStalePlaceNeverStrandsAWaiter(t *testing.T) {
	c := shared(t)
	for _, variant := range []string{lock.Lua, lock.Redlock} {
		t.Run(variant, func(t *testing.T) {
			h := newEnv(t, c)
			h.voting()
			s := newEnvOn(t, testsupport.Options(t, c), lock.Options{Namespace: h.ns}, noTimers)
			p := newEnvOn(t, testsupport.Options(t, c), lock.Options{Namespace: h.ns}, noTimers)
			ctx := context.Background()
			holder := mustAcquire(t, h.locker(variant), "k", time.Second)

			// S waits, gives up, and leaves its place in the line.
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			if lease, err := s.locker(variant).Acquire(sctx, "k"); err == nil {
				_ = lease.Release(ctx)
				t.Fatal("S got a lock that is held")
			}
			cancel()
			h.inLine("k", 1, time.Second)

			got := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				lease, err := p.locker(variant).Acquire(wctx, "k")
				if err == nil {
					_ = lease.Release(ctx)
				}
				got <- err
			}()
			h.inLine("k", 2, 2*time.Second)
			released := time.Now()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiter behind a stale place slept while the key was free: %v", err)
			}
			if waited := time.Since(released); waited > 2*time.Second {
				t.Errorf("the waiter got the free key %v after its release", waited)
			}
		})
	}
}

// A process that releases a hot key and comes straight back for it (a
// batch of orders, a loop) must not take it again ahead of the process its
// release woke: the release puts it at the back of the line, behind that
// head. Two instances, one client each, both already seen in the key's
// line: their grants take turns. Without the place behind the head, the
// releaser's next try, microseconds after its release, beats the woken
// head's every time, and the other instance waits out whole streaks.
func TestReleaserQueuesBehindTheHeadItWoke(t *testing.T) {
	c := shared(t)
	for _, variant := range []string{lock.Lua, lock.Redlock} {
		t.Run(variant, func(t *testing.T) {
			a := newEnv(t, c)
			a.voting()
			b := a.instance()
			al := a.locker(variant)
			bl, err := b.Locker(variant)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			acquire := func(l *lock.Locker) <-chan *lock.Lease { return acquireAsync(ctx, t, l, "hot", 10*time.Second) }
			// Each instance meets the line once: b waits in it while a
			// holds the key, then a while b holds it.
			held, err := al.Acquire(ctx, "hot")
			if err != nil {
				t.Fatal(err)
			}
			toB := acquire(bl)
			a.queued("hot", 2*time.Second)
			_ = held.Release(ctx)
			heldB := <-toB
			toA := acquire(al)
			a.inLine("hot", 2, 2*time.Second) // b's place, stale now, and a's
			_ = heldB.Release(ctx)
			first := <-toA
			if first == nil || heldB == nil {
				t.FailNow()
			}

			// Now both come straight back for the key, over and over.
			var mu sync.Mutex
			var order []int
			stop := time.Now().Add(time.Second)
			var wg sync.WaitGroup
			for i, l := range []*lock.Locker{al, bl} {
				wg.Go(func() {
					lease := first
					if i == 1 {
						lease = nil
					}
					for time.Now().Before(stop) {
						if lease == nil {
							var err error
							if lease, err = l.Acquire(ctx, "hot"); err != nil {
								t.Error(err)
								return
							}
						}
						mu.Lock()
						order = append(order, i)
						mu.Unlock()
						time.Sleep(time.Millisecond) // the critical section
						_ = lease.Release(ctx)
						lease = nil
					}
				})
			}
			wg.Wait()
			streak, longest := 0, 0
			for n, i := range order {
				if n > 0 && order[n-1] == i {
					streak++
				} else {
					streak = 1
				}
				longest = max(longest, streak)
			}
			t.Logf("%d grants, longest run by one instance %d", len(order), longest)
			if len(order) < 20 {
				t.Fatalf("only %d grants in a second", len(order))
			}
			if longest > 3 {
				t.Errorf("one instance took the key %d times in a row while the other's head waited", longest)
			}
		})
	}
}
