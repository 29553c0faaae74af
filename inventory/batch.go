package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"flashsale/lock"
)

// Batching under one lease.
//
// Without it every order takes a lease and a transaction of its own, so one
// hot SKU sells at most one order per hold (a hold is about 2 ms here), whatever the
// lock. With it (Config.Batch, SetBatch), the orders for one SKU that arrive
// in this process while the SKU's lock is busy here wait together in the
// SKU's line. One goroutine per busy line, its driver, takes the lease; once
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
//     written, the lease is left as a dead process leaves it);
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
// is not set. At the rates a hot SKU sees here a batch is a few orders (what
// arrives during one hold of a few ms); the cap matters in a burst, where
// it bounds the transaction (one insert per order) and the hold, which
// stays a few ms, far inside any lease TTL, while the rest of the burst is
// served by the next lease a few ms later.
const DefaultBatchMax = 64

// batchLines are the lines of the SKUs whose lock is busy in this process,
// by variant and SKU. A line is in the map exactly while its driver runs.
type batchLines struct {
	mu    sync.Mutex
	lines map[string]*batchLine
}

// batchLine is the orders waiting for one SKU's next lease, oldest first.
type batchLine struct {
	waiting []*batchOrder
}

// batchOrder is one request in a line. Once taken (by a batch, or answered
// by the driver) it must wait for its answer; before that, it may leave.
type batchOrder struct {
	ctx      context.Context
	p        Purchase
	hash     string
	sale     int64
	deadline time.Time   // arrival + lock-wait budget
	taken    bool        // guarded by batchLines.mu
	answer   chan answer // buffered: the driver never blocks on it
}

// answer is what a request of a batch is told.
type answer struct {
	order  Order
	replay bool
	err    error
}

// SetBatch switches batching on or off for the orders that arrive from now
// on; the lines already waiting are served as they are.
func (s *Service) SetBatch(on bool) { s.batch.Store(on) }

// Batch reports whether orders are batched under one lease.
func (s *Service) Batch() bool { return s.batch.Load() }

// batched reports whether an order under locker joins its SKU's line: with
// batching on, for the rungs whose guard is the lock.
func (s *Service) batched(locker *lock.Locker) bool {
	return s.batch.Load() && locker.Guard() == lock.GuardLock
}

// buyBatched puts the order in its SKU's line, starting the line's driver
// if nobody here is acquiring or holding the SKU's lock, and waits for the
// answer, for the request to end or for its lock-wait budget, whichever
// comes first. An order that leaves before a batch took it is not written.
func (s *Service) buyBatched(ctx context.Context, p Purchase, hash string, sale int64, locker *lock.Locker) (Order, bool, error) {
	o := &batchOrder{ctx: ctx, p: p, hash: hash, sale: sale, deadline: time.Now().Add(s.lockWait), answer: make(chan answer, 1)}
	key := locker.Name() + " " + p.SKU
	b := &s.lines
	b.mu.Lock()
	line, busy := b.lines[key]
	if !busy {
		line = &batchLine{}
		b.lines[key] = line
	}
	line.waiting = append(line.waiting, o)
	b.mu.Unlock()
	if !busy {
		go s.drive(key, line, locker, p.SKU)
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
		gone = fmt.Errorf("%w: sku:%s not obtained within %v: waited in its line", ErrLockBusy, p.SKU, s.lockWait)
	}
	if b.leave(line, o) {
		return Order{}, false, gone
	}
	a := <-o.answer // a batch took it first: its answer stands
	return a.order, a.replay, a.err
}

// leave takes o out of its line unless it was taken already.
func (b *batchLines) leave(line *batchLine, o *batchOrder) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o.taken {
		return false
	}
	for i, w := range line.waiting {
		if w == o {
			line.waiting = append(line.waiting[:i], line.waiting[i+1:]...)
			break
		}
	}
	return true
}

// next answers busy the waiters whose budget has run out and returns the
// latest budget of the others: how long the next lease is worth waiting
// for. With nobody waiting, the line is closed (removed from the map, so
// the next order starts a new driver) and ok is false.
func (b *batchLines) next(key string, line *batchLine, lockWait time.Duration) (deadline time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	kept := line.waiting[:0]
	for _, o := range line.waiting {
		if !now.Before(o.deadline) {
			o.taken = true
			o.answer <- answer{err: fmt.Errorf("%w: sku:%s not obtained within %v", ErrLockBusy, o.p.SKU, lockWait)}
			continue
		}
		kept = append(kept, o)
		deadline = o.deadline
	}
	clear(line.waiting[len(kept):])
	line.waiting = kept
	if len(kept) == 0 {
		delete(b.lines, key)
		return time.Time{}, false
	}
	return deadline, true
}

// take removes up to n waiting orders, oldest first, for one batch; or
// answers every waiting order with err, when err is not nil.
func (b *batchLines) take(line *batchLine, n int, err error) []*batchOrder {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, len(line.waiting))
	if err != nil {
		n = len(line.waiting)
	}
	batch := make([]*batchOrder, n)
	copy(batch, line.waiting)
	line.waiting = append(line.waiting[:0], line.waiting[n:]...)
	for _, o := range batch {
		o.taken = true
		if err != nil {
			o.answer <- answer{err: err}
		}
	}
	return batch
}

// drive serves the line until nobody waits in it: acquire the SKU's lock
// (waiting at most as long as the most patient order in line), take the
// batch, sell it, release, again. A busy lock leaves the line to the
// budgets; a crash or unreachable nodes answer everyone waiting, as each
// would have been answered alone.
func (s *Service) drive(key string, line *batchLine, locker *lock.Locker, sku string) {
	name := "sku:" + sku
	for {
		deadline, ok := s.lines.next(key, line, s.lockWait)
		if !ok {
			return
		}
		wctx, cancel := context.WithDeadline(context.Background(), deadline)
		lease, err := locker.Acquire(wctx, name)
		cancel()
		if err != nil {
			if err = s.acquireError(context.Background(), locker, name, err); !errors.Is(err, ErrLockBusy) {
				s.lines.take(line, 0, err)
			}
			continue
		}
		batch := s.lines.take(line, s.batchMax, nil)
		if len(batch) == 0 { // everyone left while the lease was on its way
			rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			_ = lease.Release(rctx) // nothing was done under it: an error changes nothing
			cancel()
			continue
		}
		s.serveBatch(lease, locker, sku, batch)
	}
}

// serveBatch sells one batch under lease, answers every order of it, then
// gives the lease back (except after an injected crash: a dead process
// releases nothing). The answers go first: what was committed stands
// whatever the release does, so no shopper waits for it.
func (s *Service) serveBatch(lease *lock.Lease, locker *lock.Locker, sku string, batch []*batchOrder) {
	ctx := context.Background() // the batch is nobody's request: no one shopper's hang-up ends it
	answers, err := s.sellBatch(ctx, lease, locker, sku, batch)
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
		s.log.Warn("lock release failed after the batch", "lock", lease.Key(), "variant", locker.Name(), "orders", len(batch), "err", rerr)
	}
}

// totalQty is the units the orders take.
func totalQty(os []*Order) int64 {
	var n int64
	for _, o := range os {
		n += o.Qty
	}
	return n
}

// userKey is one user's Idempotency-Key.
type userKey struct{ user, key string }

// sellBatch is the sale of one batch: read, allot, work, write, as the
// package comment above says. It returns each order's answer, or one error
// that answers the whole batch (a stale fence, a crash, a lost lease, a
// failed write).
func (s *Service) sellBatch(ctx context.Context, lease *lock.Lease, locker *lock.Locker, sku string, batch []*batchOrder) ([]answer, error) {
	token, fenced := lease.Token()
	if fenced {
		if err := s.registerFence(ctx, "products", "sku = ?", token, sku); err != nil {
			return nil, err
		}
	}
	prod, err := s.product(ctx, sku)
	if err != nil {
		return nil, err
	}
	earlier, err := s.ordersByKeys(ctx, batch)
	if err != nil {
		return nil, err
	}
	answers := make([]answer, len(batch))
	twinOf := make(map[int]int) // a later order with a key earlier in the batch → that earlier one
	first := make(map[userKey]int)
	left := prod.Stock
	var sold []int
	for i, o := range batch {
		switch {
		case o.ctx.Err() != nil:
			answers[i].err = fmt.Errorf("waiting for lock sku:%s: %w", sku, context.Cause(o.ctx))
			continue
		case o.sale != prod.Sale:
			answers[i].err = fmt.Errorf("%w: products [%s]", ErrSaleReset, sku)
			continue
		}
		if o.p.IdempotencyKey != "" {
			uk := userKey{o.p.User, o.p.IdempotencyKey}
			if e, found := earlier[uk]; found {
				answers[i] = replayOf(e, o)
				continue
			}
			if j, dup := first[uk]; dup {
				twinOf[i] = j
				continue
			}
			first[uk] = i
		}
		if o.p.Qty > left {
			answers[i].err = fmt.Errorf("%w: %s has %d left, %d asked", ErrSoldOut, sku, left, o.p.Qty)
			continue
		}
		left -= o.p.Qty
		sold = append(sold, i)
	}
	if sold = s.batchWork(batch, sold, answers); len(sold) > 0 {
		if err := s.beforeWrite(ctx, lease); err != nil {
			return nil, err
		}
		if err := s.commitBatch(ctx, lease, locker, prod, batch, sold, answers); err != nil {
			return nil, err
		}
	}
	for i, j := range twinOf {
		answers[i] = twinAnswer(answers[j], batch[j], batch[i])
	}
	return answers, nil
}

// batchWork runs the business work of the sold orders concurrently, each
// under its own request's context, and returns the orders still sold: one
// whose request ended during its work is answered with that, and not
// written (its units stay unsold).
func (s *Service) batchWork(batch []*batchOrder, sold []int, answers []answer) []int {
	errs := make([]error, len(sold))
	var wg sync.WaitGroup
	for n, i := range sold {
		wg.Go(func() { errs[n] = s.businessWork(batch[i].ctx) })
	}
	wg.Wait()
	kept := sold[:0]
	for n, i := range sold {
		if errs[n] != nil {
			answers[i].err = fmt.Errorf("business work of an order to %s: %w", batch[i].p.SKU, errs[n])
			continue
		}
		kept = append(kept, i)
	}
	return kept
}

// commitBatch writes the sold orders and the stock in one transaction. A
// unique violation means a twin with the same Idempotency-Key committed in
// another process since the keys were read: those orders become replays
// of the twin's, and the rest is written again, still under the same lease
// and fence.
func (s *Service) commitBatch(ctx context.Context, lease *lock.Lease, locker *lock.Locker, prod Product, batch []*batchOrder, sold []int, answers []answer) error {
	token, fenced := lease.Token()
	for len(sold) > 0 {
		orders := make([]*Order, len(sold))
		for n, i := range sold {
			o := newOrder(batch[i].p, batch[i].hash, locker, prod.PriceCents, token, fenced)
			orders[n] = &o
		}
		after, err := s.commitOrder(ctx, prod.Sale, prod.Stock, token, fenced, s.writeFor(locker), s.caught(locker), orders...)
		if err == nil {
			for n, i := range sold {
				answers[i].order = *orders[n]
			}
			s.notify(Change{Type: "stock", SKU: prod.SKU, Stock: &after, Owner: lease.Owner()})
			return nil
		}
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			return err
		}
		some := make([]*batchOrder, len(sold))
		for n, i := range sold {
			some[n] = batch[i]
		}
		earlier, err := s.ordersByKeys(ctx, some)
		if err != nil {
			return err
		}
		kept := sold[:0]
		for _, i := range sold {
			if e, found := earlier[userKey{batch[i].p.User, batch[i].p.IdempotencyKey}]; found && batch[i].p.IdempotencyKey != "" {
				answers[i] = replayOf(e, batch[i])
				continue
			}
			kept = append(kept, i)
		}
		if len(kept) == len(sold) {
			return errors.New("insert orders: duplicate key, but no order carries any of the batch's idempotency keys")
		}
		sold = kept
	}
	return nil
}

// ordersByKeys reads, in one query, the orders the batch's Idempotency-Keys
// already made, by user and key. The query names the users too: a key is
// unique per user, and the users lead that index, so the query reads only
// the batch's users' orders instead of scanning every order.
func (s *Service) ordersByKeys(ctx context.Context, batch []*batchOrder) (map[userKey]Order, error) {
	var users, keys []string
	want := map[userKey]bool{}
	for _, o := range batch {
		if o.p.IdempotencyKey != "" {
			users, keys = append(users, o.p.User), append(keys, o.p.IdempotencyKey)
			want[userKey{o.p.User, o.p.IdempotencyKey}] = true
		}
	}
	found := map[userKey]Order{}
	if len(keys) == 0 {
		return found, nil
	}
	var os []Order
	if err := s.db.WithContext(ctx).Where("user_name IN ? AND idempotency_key IN ?", users, keys).Find(&os).Error; err != nil {
		return nil, fmt.Errorf("read orders by idempotency key: %w", err)
	}
	for _, o := range os {
		if k := (userKey{o.User, *o.IdempotencyKey}); want[k] {
			found[k] = o
		}
	}
	return found, nil
}

// replayOf is the answer to o when its key already made order e: a replay
// of the same request, or a key reused for another.
func replayOf(e Order, o *batchOrder) answer {
	if e.RequestHash != o.hash {
		return answer{err: fmt.Errorf("%w: key %q", ErrIdempotencyKeyReused, o.p.IdempotencyKey)}
	}
	return answer{order: e, replay: true}
}

// twinAnswer is the answer to twin, which came in the same batch as first
// with the same user and key: first's order as a replay, first's refusal,
// or a key reused for another request.
func twinAnswer(a answer, first, twin *batchOrder) answer {
	switch {
	case first.hash != twin.hash:
		return answer{err: fmt.Errorf("%w: key %q", ErrIdempotencyKeyReused, twin.p.IdempotencyKey)}
	case a.err == nil:
		return answer{order: a.order, replay: true}
	case first.ctx.Err() != nil:
		// The first request went away: that says nothing about this one,
		// which may simply try again.
		return answer{err: fmt.Errorf("%w: the same request in this batch ended before it was written", ErrLockBusy)}
	}
	return answer{err: a.err}
}
