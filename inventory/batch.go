package inventory

import (
	"context"
	"fmt"
	"time"

	"flashsale/lock"
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
	locker, err := s.lockers.Locker(variant)
	return err == nil && s.batched(locker)
}

// batched reports whether an order under locker joins its SKU's queue.
func (s *Service) batched(locker *lock.Locker) bool {
	return s.batch.Load() && guardOf(locker) == guardLock
}

// buyBatched puts the order in its SKU's queue, starting the queue's driver
// if nobody here is acquiring or holding the SKU's lock, and waits for the
// answer, for the request to end or for its lock-wait budget, whichever
// comes first: the deadline the request's budget set when it began
// (budget.go). An order that leaves before a batch took it is not written.
func (s *Service) buyBatched(ctx context.Context, deadline time.Time, p Purchase, hash string, sale int64, locker *lock.Locker) (Order, bool, error) {
	o := &batchOrder{ctx: ctx, p: p, hash: hash, sale: sale, deadline: deadline, answer: make(chan answer, 1)}
	key := locker.Name() + " " + p.SKU
	b := &s.queues
	b.mu.Lock()
	queue, busy := b.queues[key]
	if !busy {
		queue = &batchQueue{}
		b.queues[key] = queue
	}
	queue.waiting = append(queue.waiting, o)
	b.mu.Unlock()
	if !busy {
		go s.drive(key, queue, locker, p.SKU)
	}
	budget := time.NewTimer(time.Until(o.deadline))
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
	if b.leave(queue, o) {
		return Order{}, false, gone
	}
	a := <-o.answer // a batch took it first: its answer stands
	return a.order, a.replay, a.err
}
