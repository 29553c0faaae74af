package inventory

import (
	"context"
	"errors"

	"flashsale/lock"
)

// drive serves the queue until nobody waits in it: acquire the SKU's lock
// (waiting at most as long as the most patient order in the queue), take the
// batch, sell it, release, again. A busy lock leaves the queue to the
// budgets; a crash or unreachable nodes answer everyone waiting, as each
// would have been answered alone.
func (s *Service) drive(key string, queue *batchQueue, b batching, sku string) {
	locker := b.locker
	name := "sku:" + sku
	for {
		deadline, ok := s.queues.next(key, queue, s.lockWait)
		if !ok {
			return
		}
		wctx, cancel := context.WithDeadline(context.Background(), deadline)
		lease, err := locker.Acquire(wctx, name)
		cancel()
		if err != nil {
			if err = s.acquireError(context.Background(), locker, name, err); !errors.Is(err, ErrLockBusy) {
				s.queues.take(queue, 0, err)
			}
			continue
		}
		batch := s.queues.take(queue, s.batchMax, nil)
		if len(batch) == 0 { // everyone left while the lease was on its way
			rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			_ = lease.Release(rctx) // nothing was done under it: an error changes nothing
			cancel()
			continue
		}
		s.serveBatch(lease, b.rung.rule(), sku, batch)
	}
}

// serveBatch sells one batch under lease, written as w says, answers every order of it, then
// gives the lease back (except after an injected crash: a dead process
// releases nothing). The answers go first: what was committed stands
// whatever the release does, so no shopper waits for it.
func (s *Service) serveBatch(lease *lock.Lease, w writeRule, sku string, batch []*batchOrder) {
	ctx := context.Background() // the batch is nobody's request: no one shopper's hang-up ends it
	s.stats.Batches.Add(1)
	s.stats.BatchedOrders.Add(uint64(len(batch)))
	answers, err := s.sellBatch(ctx, lease, w, sku, batch)
	crashed := errors.Is(err, ErrHolderCrashed)
	if crashed {
		s.stats.Crashes.Add(1)
	}
	for i, o := range batch {
		if err != nil {
			o.answer <- answer{err: err}
			continue
		}
		o.answer <- answers[i]
	}
	if crashed {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	if rerr := lease.Release(rctx); rerr != nil {
		s.stats.ReleaseErrors.Add(1)
		s.log.Warn("lock release failed after the batch", "lock", lease.Key(), "orders", len(batch), "err", rerr)
	}
}
