package handlers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"flashsale/handlers"
	"flashsale/lock"
)

// holdHot starts a sale of the SKU hot and takes its lua lock, as another
// holder would, until the returned release (which may be called twice).
func (a *app) holdHot(ctx context.Context) (release func()) {
	a.t.Helper()
	a.reset(100, 0)
	l, err := a.lockers.Locker(lock.Lua)
	if err != nil {
		a.t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, "sku:hot")
	if err != nil {
		a.t.Fatal(err)
	}
	return sync.OnceFunc(func() {
		if err := lease.Release(context.Background()); err != nil {
			a.t.Errorf("release: %v", err)
		}
	})
}

// TestInFlightBound sends more concurrent orders than the instance admits,
// while the test itself holds the SKU's lock: every admitted order waits in
// the SKU's line, so the bound is the most that can be inside at once. The
// rest must be answered 503 overloaded at once (while the admitted ones are
// still waiting), with Retry-After; once the test lets go of the lock the
// admitted ones sell. An instance that admitted more than the bound would
// answer fewer than the excess at once, and the test would see the admitted
// ones time out instead.
func TestInFlightBound(t *testing.T) {
	const bound, orders = 4, 20
	a := newApp(t, appOpts{ttl: 30 * time.Second, wait: 20 * time.Second, config: func(c *handlers.Config) { c.MaxInFlight = bound }})
	a.svc.SetBatch(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release := a.holdHot(ctx)
	defer release()

	answers := make(chan response, orders)
	var wg sync.WaitGroup
	for i := range orders {
		wg.Go(func() {
			answers <- a.callCtx(ctx, "POST", "/api/orders", map[string]any{"sku": "hot", "qty": 1, "user": fmt.Sprintf("u%d", i)},
				"X-Lock-Variant", lock.Lua)
		})
	}
	got := map[string]int{}
	count := func(r response) {
		switch {
		case r.status == 503 && r.code() == "overloaded":
			if r.header.Get("Retry-After") == "" {
				t.Errorf("overloaded without Retry-After: %s", r.body)
			}
			got["overloaded"]++
		case r.status == 201:
			got["sold"]++
		default:
			got[fmt.Sprintf("%d %s", r.status, r.code())]++
		}
	}
	// The excess is answered while the lock is still held.
	for range orders - bound {
		select {
		case r := <-answers:
			count(r)
		case <-ctx.Done():
			t.Fatalf("only %v answered while the lock was held; want %d refused at once", got, orders-bound)
		}
	}
	if got["overloaded"] != orders-bound {
		t.Errorf("while the lock was held: %v, want %d overloaded", got, orders-bound)
	}
	release()
	wg.Wait()
	close(answers)
	for r := range answers {
		count(r)
	}
	if got["sold"] != bound || got["overloaded"] != orders-bound || len(got) != 2 {
		t.Errorf("answers %v, want %d sold and %d overloaded", got, bound, orders-bound)
	}
	if au := a.audit(); au.Orders != bound {
		t.Errorf("audit counts %d orders, want %d", au.Orders, bound)
	}
	if n := metricValue(t, a.metrics(), `flashsale_limit_refusals_total{limit="in_flight"}`); int(n) != orders-bound {
		t.Errorf("metric counts %v in-flight refusals, want %d", n, orders-bound)
	}
}

// TestAnsweredByDeadline: while the SKU's lock is held elsewhere for far
// longer than the lock-wait budget, every order, batched or not, is
// answered 503 lock_busy by its deadline, not when the lock comes free.
// The bound checked is the budget plus a generous second for a loaded
// machine: the property is that the budget is kept, not how fast.
func TestAnsweredByDeadline(t *testing.T) {
	const wait, slack, orders = 500 * time.Millisecond, time.Second, 6
	a := newApp(t, appOpts{ttl: 30 * time.Second, wait: wait})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer a.holdHot(ctx)()
	for _, batch := range []bool{false, true} {
		a.svc.SetBatch(batch)
		var wg sync.WaitGroup
		for i := range orders {
			wg.Go(func() {
				start := time.Now()
				r := a.callCtx(ctx, "POST", "/api/orders", map[string]any{"sku": "hot", "qty": 1, "user": fmt.Sprintf("d%d", i)},
					"X-Lock-Variant", lock.Lua)
				took := time.Since(start)
				want(t, fmt.Sprintf("batch %v, order %d", batch, i), r, 503, "lock_busy")
				if took > wait+slack {
					t.Errorf("batch %v, order %d: answered after %v, budget %v", batch, i, took, wait)
				}
			})
		}
		wg.Wait()
	}
	if au := a.audit(); au.Orders != 0 {
		t.Errorf("audit counts %d orders while the lock was held throughout", au.Orders)
	}
}
