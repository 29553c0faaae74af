package inventory

import (
	"context"
	"fmt"
	"time"
)

// Batching under one lease (Config.Batch, SetBatch). One order per lease
// sells a hot SKU at most one order per hold, whatever the lock. Batched,
// the orders for one SKU that arrive while its lock is busy here wait in
// the SKU's queue, and one driver goroutine per busy queue serves all that
// waited under one lease, as one sale: one token registration, one read,
// one transaction. The lock knows nothing of it. docs/design.md, "Batching
// under one lease", says what a batch keeps of an order alone and what it
// never does.

// DefaultBatchMax is the most orders one lease serves when Config.BatchMax
// is not set. At the rates a hot SKU sees in a quiet hour a batch is a few
// orders (what arrives during one hold of a few ms). In a spike it is what
// the instance admitted (handlers' in-flight bound, of the same default):
// when the cores are saturated every hand-off of the lock between
// instances slows, and only a lease that takes every order waiting here
// keeps the sales per second up. The cap bounds the transaction (one
// multi-row insert) and the hold, far inside any lease TTL.
const DefaultBatchMax = 256

// SetBatch switches batching on or off for the orders that arrive from now
// on; the queues already waiting are served as they are.
func (s *Service) SetBatch(on bool) { s.batch.Store(on) }

// Batch reports whether orders are batched under one lease.
func (s *Service) Batch() bool { return s.batch.Load() }

// Batched reports whether an order under the named lock variant joins its
// SKU's queue now: with batching on, for the rungs whose guard is the lock.
func (s *Service) Batched(variant string) bool {
	g, err := s.guard(variant)
	b, ok := g.(batching)
	return err == nil && ok && b.on()
}

// batching wraps a lock rung's guard: with batching on, an order shares its
// reads before the lock with the SKU's other orders and waits in the SKU's
// queue for a lease that serves them all. With batching off, and for a
// seat, the rung's guard sells alone.
type batching struct {
	alone
	rung lockGuard // how the batch writes
}

// on reports whether the orders arriving now are batched.
func (b batching) on() bool { return b.s.batch.Load() }

func (b batching) buy(ctx context.Context, p purchase) (Order, bool, error) {
	if !b.on() {
		return b.alone.buy(ctx, p)
	}
	if earlier, found, err := b.s.beforeLock(ctx, &p, b.s.sharedRead); err != nil || found {
		return earlier, found, err
	}
	return b.s.buyBatched(ctx, p, b)
}

// buyBatched puts the order in its SKU's queue, starting the queue's driver
// if nobody here is acquiring or holding the SKU's lock, and waits for the
// answer, for the request to end or for its lock-wait budget, whichever
// comes first: the deadline the request's budget set when it began
// (budget.go). An order that leaves before a batch took it is not written.
func (s *Service) buyBatched(ctx context.Context, p purchase, b batching) (Order, bool, error) {
	o := &batchOrder{ctx: ctx, p: p, answer: make(chan answer, 1)}
	key := p.Lock + " " + p.SKU
	q := &s.queues
	q.mu.Lock()
	queue, busy := q.queues[key]
	if !busy {
		queue = &batchQueue{}
		q.queues[key] = queue
	}
	queue.waiting = append(queue.waiting, o)
	q.mu.Unlock()
	if !busy {
		go s.drive(key, queue, b, p.SKU)
	}
	budget := time.NewTimer(time.Until(p.deadline))
	defer budget.Stop()
	var gone error
	select {
	case a := <-o.answer:
		return a.order, a.replay, a.err
	case <-ctx.Done():
		gone = fmt.Errorf("waiting for lock sku:%s: %w", p.SKU, context.Cause(ctx))
	case <-budget.C:
		gone = fmt.Errorf("%w: sku:%s not obtained within %v: waited in its queue", ErrLockBusy, p.SKU, s.lockWait)
	}
	if q.leave(queue, o) {
		return Order{}, false, gone
	}
	a := <-o.answer // a batch took it first: its answer stands
	return a.order, a.replay, a.err
}
