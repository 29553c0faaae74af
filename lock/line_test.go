package lock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/redistest"
	"flashsale/lock"
)

// Two sets of lockers stand for two app instances on one hot Redlock key:
// the key's line serves both, no section overlaps another, and neither
// instance is starved.
func TestLineServesEveryInstance(t *testing.T) {
	c := shared(t)
	a := newEnv(t, c)
	a.voting()
	b, err := lock.NewLockers(redistest.Options(c), lock.WithNamespace(a.ns), lock.WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var inside atomic.Int32
	var overlaps atomic.Int32
	grants := [2]atomic.Int32{}
	var wg sync.WaitGroup
	for i, ls := range []*lock.Lockers{a.ls, b} {
		l, _ := ls.Get(lock.Redlock)
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
	c := redistest.Start(t, 5, localredis.Options{})
	e := newEnv(t, c)
	e.aged(c)
	l := e.locker(lock.Redlock)
	ctx := context.Background()
	holder := mustAcquire(t, l, "k", time.Second)

	// The dead process: it waits, joins the line, and dies there.
	dead, err := lock.NewLockers(redistest.Options(c), lock.WithNamespace(e.ns), lock.WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	dl, _ := dead.Get(lock.Redlock)
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := dl.Acquire(dctx, "k"); err == nil {
		t.Fatal("the dead process got a held lock")
	}
	dcancel()
	_ = dead.Close()

	// A live waiter elsewhere, behind the dead head.
	live, err := lock.NewLockers(redistest.Options(c), lock.WithNamespace(e.ns), lock.WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	ll, _ := live.Get(lock.Redlock)
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
