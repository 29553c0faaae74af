package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
	"flashsale/internal/taptest"
	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
)

// leaseCount counts the leases granted in a process, to tell one lease per
// batch from one per order.
type leaseCount struct{ n atomic.Int64 }

func (c *leaseCount) option() lock.Options {
	return taptest.Observed(lock.Options{}, func(e locktap.Event) {
		if e.Kind == locktap.Acquired {
			c.n.Add(1)
		}
	})
}

// reply is one order's answer.
type reply struct {
	order  inventory.Order
	replay bool
	err    error
}

// queued sends the purchases, one after the other, while the test holds
// variant's lock on the hot SKU: each waits in the SKU's queue before the
// next is sent, so the queue's order is the purchases'. Then it releases the
// lock, so that the next lease serves them (at most BatchMax a lease); the
// replies come in the purchases' order.
func queued(t *testing.T, s sale, variant string, ps []inventory.Purchase) []reply {
	t.Helper()
	return queue(t, s, variant, ps, nil)()
}

// queue is queued up to the release: finish releases the lock and waits for
// the replies. ctxs, where given, are the requests' contexts.
func queue(t *testing.T, s sale, variant string, ps []inventory.Purchase, ctxs []context.Context) (finish func() []reply) {
	t.Helper()
	locker, err := s.lockers.Locker(variant)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := locker.Acquire(context.Background(), "sku:hot")
	if err != nil {
		t.Fatal(err)
	}
	replies := make([]reply, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		ctx := context.Background()
		if i < len(ctxs) && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		wg.Go(func() {
			o, replay, err := s.svc.Buy(ctx, p)
			replies[i] = reply{o, replay, err}
		})
		waitFor(t, func() bool { return inventory.Waiting(s.svc, variant, "hot") == i+1 }, fmt.Sprintf("order %d waiting in the queue", i))
	}
	return func() []reply {
		t.Helper()
		if err := hold.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		return replies
	}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// N concurrent orders with batching on sell exactly min(N, stock) in far
// fewer leases than orders; each order is answered on its own, and every
// 201 has its own order row.
func TestBatchSellsExactlyTheStock(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 3)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			var leases leaseCount
			s := newSale(t, d.DSN(t), nodes, inventory.Config{LockWait: 10 * time.Second, Batch: true}, leases.option())
			s.svc.SetWork(5 * time.Millisecond)
			for _, v := range []string{lock.Lua, lock.Redlock, lock.LuaFence, lock.RedlockFence} {
				t.Run(v, func(t *testing.T) {
					s.reset(t, 20, 0)
					before := leases.n.Load()
					sold, errs := s.buyers(t, 60, v)
					granted := leases.n.Load() - before
					if sold != 20 || errs["sold_out"] != 40 {
						t.Fatalf("sold %d (want 20), other outcomes %v (want 40 sold_out)", sold, errs)
					}
					if granted > 30 {
						t.Fatalf("%d leases for 60 orders arriving together: not batched", granted)
					}
					if a := s.audit(t); !a.OK || a.SoldUnits != 20 || a.Orders != 20 {
						t.Fatalf("audit %+v", a)
					}
					t.Logf("%s: 60 orders, %d leases", v, granted)
				})
			}
		})
	}
}

// One batch: units allotted in arrival order past which orders are sold
// out, twins with one Idempotency-Key resolved to one order, a key reused
// with another body refused, and all of it under one lease, whose token
// every order of the batch carries.
func TestBatchAnswersEachOrder(t *testing.T) {
	nodes := testsupport.Redis(t, 3)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			var leases leaseCount
			s := newSale(t, d.DSN(t), nodes, inventory.Config{LockWait: 10 * time.Second, Batch: true}, leases.option())
			s.reset(t, 5, 0)
			v := lock.RedlockFence
			ctx := context.Background()
			earlier, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "eve", Lock: v, IdempotencyKey: "e-1"})
			if err != nil {
				t.Fatal(err)
			}
			ps := []inventory.Purchase{
				{SKU: "hot", Qty: 2, User: "ann", Lock: v, IdempotencyKey: "a-1"},
				{SKU: "hot", Qty: 2, User: "ann", Lock: v, IdempotencyKey: "a-1"}, // twin in the batch: replay
				{SKU: "hot", Qty: 3, User: "ann", Lock: v, IdempotencyKey: "a-1"}, // same key, other body
				{SKU: "hot", Qty: 2, User: "bob", Lock: v},                        // the last two units
				{SKU: "hot", Qty: 1, User: "cat", Lock: v},                        // past the stock
			}
			before := leases.n.Load()
			r := queued(t, s, v, ps)
			if got := leases.n.Load() - before; got != 2 {
				t.Errorf("%d leases granted (the test's hold and the batch's expected, 2)", got)
			}
			if r[0].err != nil || r[0].replay || r[1].err != nil || !r[1].replay || r[1].order.ID != r[0].order.ID {
				t.Errorf("twins: first %+v, second %+v", r[0], r[1])
			}
			if !errors.Is(r[2].err, inventory.ErrIdempotencyKeyReused) {
				t.Errorf("key reused with another body: %v", r[2].err)
			}
			if r[3].err != nil || r[3].replay || r[3].order.ID == r[0].order.ID {
				t.Errorf("bob's order: %+v", r[3])
			}
			if !errors.Is(r[4].err, inventory.ErrSoldOut) {
				t.Errorf("the order past the stock: %v, want sold out", r[4].err)
			}
			if f1, f4 := r[0].order.Fence, r[3].order.Fence; f1 == nil || f4 == nil || *f1 != *f4 || *f1 <= *earlier.Fence {
				t.Errorf("fences: batch %v and %v, earlier %v: want one token, newer than the earlier batch's", f1, f4, *earlier.Fence)
			}
			if a := s.audit(t); !a.OK || a.Orders != 3 || a.SoldUnits != 5 { // eve's, ann's, bob's
				t.Fatalf("audit %+v: want 3 orders, 5 units", a)
			}
			o, replay, err := s.svc.Buy(ctx, ps[0])
			if err != nil || !replay || o.ID != r[0].order.ID {
				t.Fatalf("ann's key in a later batch: %+v replay=%v err=%v", o, replay, err)
			}
		})
	}
}

// A request that ends while it waits in the queue gets its own error at
// once and is not written; the rest of the queue is served.
func TestBatchRequestGoneWhileQueued(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{LockWait: 10 * time.Second, Batch: true})
	s.reset(t, 10, 0)
	gone, cancel := context.WithCancel(context.Background())
	ps := make([]inventory.Purchase, 4)
	for i := range ps {
		ps[i] = inventory.Purchase{SKU: "hot", Qty: 1, User: fmt.Sprintf("u%d", i), Lock: lock.Lua}
	}
	finish := queue(t, s, lock.Lua, ps, []context.Context{nil, gone})
	cancel()
	waitFor(t, func() bool { return inventory.Waiting(s.svc, lock.Lua, "hot") == len(ps)-1 }, "the gone order out of the queue")
	replies := finish()
	for i, r := range replies {
		if i == 1 {
			if !errors.Is(r.err, context.Canceled) {
				t.Errorf("the gone order: %v, want context canceled", r.err)
			}
			continue
		}
		if r.err != nil {
			t.Errorf("order %d: %v", i, r.err)
		}
	}
	if a := s.audit(t); !a.OK || a.Orders != 3 {
		t.Fatalf("audit %+v: want the 3 orders still waiting", a)
	}
}

// A fenced batch paused past its TTL finds a newer token on the row when it
// resumes: the store refuses the whole batch, and the sale of the holder
// that came in meanwhile (another process) stands.
func TestBatchStaleFenceRefusedWhole(t *testing.T) {
	nodes := testsupport.Redis(t, 3)
	for _, v := range []string{lock.LuaFence, lock.RedlockFence} {
		t.Run(v, func(t *testing.T) {
			paused := make(chan struct{}, 1)
			dsn := testsupport.SQLite(t)
			opts := lock.Options{Namespace: testsupport.Namespace(), TTL: 150 * time.Millisecond, NodeTimeout: 50 * time.Millisecond}
			cfg := inventory.Config{LockWait: 3 * time.Second, Batch: true}
			first := newSale(t, dsn, nodes, cfg, taptest.Observed(opts, func(e locktap.Event) {
				if e.Kind == locktap.FaultFired {
					select {
					case paused <- struct{}{}:
					default:
					}
				}
			}))
			second := newSale(t, dsn, nodes, cfg, opts)
			first.reset(t, 10, 0)
			if err := first.faults.Set(1, []fault.Fault{{Point: fault.InCriticalSection, Action: fault.Pause, P: 1, MS: 600}}); err != nil {
				t.Fatal(err)
			}
			ps := make([]inventory.Purchase, 3)
			for i := range ps {
				ps[i] = inventory.Purchase{SKU: "hot", Qty: 1, User: fmt.Sprintf("stale%d", i), Lock: v}
			}
			done := make(chan []reply, 1)
			go func() { done <- queued(t, first, v, ps) }()
			<-paused // the batch has read the stock and is frozen past its TTL
			if _, _, err := second.svc.Buy(context.Background(), inventory.Purchase{SKU: "hot", Qty: 1, User: "next", Lock: v}); err != nil {
				t.Fatalf("the next holder's order: %v", err)
			}
			for i, r := range <-done {
				if !errors.Is(r.err, inventory.ErrStaleFence) {
					t.Errorf("stale batch's order %d: %v, want stale fence", i, r.err)
				}
			}
			if a := first.audit(t); !a.OK || a.Orders != 1 || a.SoldUnits != 1 {
				t.Fatalf("audit %+v: want only the next holder's order", a)
			}
		})
	}
}

// A crash inside the batch's critical section abandons the whole batch:
// nobody is told 201, nothing is written, the lease is left to its TTL,
// and the queue is served again once it runs out.
func TestBatchCrashAbandonsTheBatch(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{LockWait: 3 * time.Second, Batch: true}, lock.Options{TTL: 200 * time.Millisecond})
	s.reset(t, 10, 0)
	if err := s.faults.Set(1, []fault.Fault{{Point: fault.InCriticalSection, Action: fault.Crash, P: 1}}); err != nil {
		t.Fatal(err)
	}
	ps := make([]inventory.Purchase, 4)
	for i := range ps {
		ps[i] = inventory.Purchase{SKU: "hot", Qty: 1, User: fmt.Sprintf("u%d", i), Lock: lock.Lua, IdempotencyKey: fmt.Sprintf("k%d", i)}
	}
	crashes := s.svc.Stats().Crashes.Load()
	for i, r := range queued(t, s, lock.Lua, ps) {
		if !errors.Is(r.err, inventory.ErrHolderCrashed) {
			t.Errorf("order %d of the crashed batch: %v, want holder crashed", i, r.err)
		}
	}
	if got := s.svc.Stats().Crashes.Load() - crashes; got != 1 {
		t.Errorf("%d crashes counted, want 1 for the batch", got)
	}
	if a := s.audit(t); a.Orders != 0 || a.SoldUnits != 0 {
		t.Fatalf("audit after the crash %+v: want nothing written", a)
	}
	s.faults.Set(0, nil)
	for i, p := range ps { // the same requests again, once the abandoned lease runs out
		if o, replay, err := s.svc.Buy(context.Background(), p); err != nil || replay {
			t.Fatalf("order %d again: %+v replay=%v err=%v", i, o, replay, err)
		}
	}
	if a := s.audit(t); !a.OK || a.Orders != 4 {
		t.Fatalf("audit %+v", a)
	}
}

// Twins in successive batches (at most one order a lease): the second
// batch reads the key under its lease and answers with the first's order.
func TestBatchKeyAcrossBatches(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	var leases leaseCount
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{LockWait: 10 * time.Second, Batch: true, BatchMax: 1}, leases.option())
	s.reset(t, 10, 0)
	p := inventory.Purchase{SKU: "hot", Qty: 1, User: "ann", Lock: lock.Lua, IdempotencyKey: "k"}
	before := leases.n.Load()
	r := queued(t, s, lock.Lua, []inventory.Purchase{p, p, p})
	if got := leases.n.Load() - before; got != 4 {
		t.Errorf("%d leases, want 4 (the test's hold, then one per order)", got)
	}
	fresh := 0
	for i, x := range r {
		if x.err != nil || x.order.ID != r[0].order.ID && !x.replay {
			t.Errorf("twin %d: %+v", i, x)
		}
		if !x.replay {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d twins made an order, want 1: %+v", fresh, r)
	}
	if a := s.audit(t); !a.OK || a.Orders != 1 {
		t.Fatalf("audit %+v", a)
	}
}
