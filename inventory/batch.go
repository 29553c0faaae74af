package inventory

import (
	"context"
	"fmt"
	"time"

	"flashsale/lock"
)

// Batching under one lease.
//
// Without it every order takes a lease and a transaction of its own, so one
// hot SKU sells at most one order per hold (a hold is about 2 ms here), whatever the
// lock. With it (Config.Batch, SetBatch), the orders for one SKU that arrive
// in this process while the SKU's lock is busy here wait together in the
// SKU's queue. One goroutine per busy queue, its driver, takes the lease; once
// it holds it, it takes every order waiting (oldest first, at most
// BatchMax) and serves them as one sale:
//
//   - the fencing token is registered once; the stock, and the orders the
//     batch's Idempotency-Keys already made, are read once;
//   - units are allotted in arrival order: an order past the remaining stock
//     is answered sold out (409), as it would have been alone;
//   - the business work of the allotted orders runs concurrently inside the
//     lease: the work of different buyers needs no exclusion from each
//     other, only from the stock;
//   - the fault points are passed once, for the batch: a pause freezes the
//     whole batch, a crash abandons it whole (nobody gets a 201, nothing is
//     written, the lease is left as a dead process leaves it); only a write
//     made again after a twin's key checks the lease again, and passes the
//     after-lease-check point again with that check;
//   - the stock and every order are written in one transaction, conditional
//     on the fence for a fenced rung, so the store refuses a stale batch as
//     a whole.
//
// Each request still gets its own answer; an Idempotency-Key holds within a
// batch (a twin in the same batch gets the first one's order as a replay)
// and across batches (keys are read under the lease, and the unique index
// settles a twin in another process); the audit sees one order row per 201.
//
// What it never does: change package lock (a batch's lease is taken and
// given back like any other; the lock knows nothing of batches); hold a
// lease across batches (other processes get their turn between them); wait
// for a batch to fill (there is no timer: a batch is whatever queued during
// the previous hold, so an order to a quiet SKU is a batch of one); write an
// order whose request ended while it waited, or keep an order waiting past
// its lock-wait budget; batch seat grabs (a seat is one buyer's) or the
// rungs whose guard is the store (db-guard, db-for-update, redis-stock).

// DefaultBatchMax is the most orders one lease serves when Config.BatchMax
// is not set. At the rates a hot SKU sees in a quiet hour a batch is a few
// orders (what arrives during one hold of a few ms). In a spike it is what
// the instance admitted (handlers' in-flight bound, of the same default):
// when the cores are saturated every hand-off of the lock between
// instances slows, and only a lease that takes every order waiting here
// keeps the sales per second up; with 64 an order waited for two or more
// leases and the instances sold half as much at 8000/s. The cap bounds the
// transaction (one multi-row insert) and the hold, 20–30 ms for a full
// batch on a saturated machine, far inside any lease TTL.
const DefaultBatchMax = 256

// SetBatch switches batching on or off for the orders that arrive from now
// on; the queues already waiting are served as they are.
func (s *Service) SetBatch(on bool) { s.batch.Store(on) }

// Batch reports whether orders are batched under one lease.
func (s *Service) Batch() bool { return s.batch.Load() }

// Batched reports whether an order under the named lock variant joins its
// SKU's queue now: with batching on, for the rungs whose guard is the lock.
func (s *Service) Batched(variant string) bool {
	locker, err := s.lockers.Get(variant)
	return err == nil && s.batched(locker)
}

// batched reports whether an order under locker joins its SKU's queue.
func (s *Service) batched(locker *lock.Locker) bool {
	return s.batch.Load() && locker.Guard() == lock.GuardLock
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
