package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gorm.io/gorm"

	"flashsale/lock"
)

// sellBatch is the sale of one batch: read, allot, work, write, as the
// overview in batch.go says. It returns each order's answer, or one error
// that answers the whole batch (a stale fence, a crash, a lost lease, a
// failed write).
func (s *Service) sellBatch(ctx context.Context, lease *lock.Lease, w writeRule, sku string, batch []*batchOrder) ([]answer, error) {
	rctx, cancel := storeStep(ctx)
	defer cancel()
	prod, err := s.readFenced(rctx, lease, sku)
	if err != nil {
		return nil, storeLate(rctx, err, "reading sku:"+sku+" under its lease")
	}
	earlier, err := ordersByKeys(rctx, s.db, keysOf(batch))
	if err != nil {
		return nil, storeLate(rctx, err, "reading the batch's keys under its lease")
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
		case o.p.sale != prod.Sale:
			answers[i].err = fmt.Errorf("%w: products [%s]", ErrSaleReset, sku)
			continue
		}
		if o.p.IdempotencyKey != "" {
			uk := o.p.key()
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
		if answers[i].err = soldOut(sku, left, o.p.Qty); answers[i].err != nil {
			continue
		}
		left -= o.p.Qty
		sold = append(sold, i)
	}
	if sold = s.batchWork(batch, sold, answers); len(sold) > 0 {
		if err := s.beforeWrite(ctx, lease); err != nil {
			return nil, err
		}
		if err := s.commitBatch(ctx, lease, w, prod, batch, sold, answers); err != nil {
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
// and fence. That is a write of its own, later than the one the lease was
// checked for, so the lease is checked again before it (lua+check asks
// the node again); a lease found lost then answers the whole batch.
func (s *Service) commitBatch(ctx context.Context, lease *lock.Lease, w writeRule, prod Product, batch []*batchOrder, sold []int, answers []answer) error {
	token, fenced := lease.Token()
	for again := false; len(sold) > 0; again = true {
		if again {
			if err := s.checkLease(ctx, lease); err != nil {
				return err
			}
		}
		orders := make([]*Order, len(sold))
		for n, i := range sold {
			o := newOrder(batch[i].p.Purchase, batch[i].p.hash, prod.PriceCents, token, fenced)
			orders[n] = &o
		}
		after, err := s.commitOrder(ctx, prod.Sale, prod.Stock, token, fenced, w, orders...)
		if err == nil {
			// The batch commits at once, so any order of its orders is
			// one the row went through: each answer says the stock its
			// order left in that order.
			left := after + totalQty(orders)
			for n, i := range sold {
				left -= orders[n].Qty
				answers[i].order = *orders[n]
				answers[i].order.StockLeft = new(left)
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
		earlier, err := ordersByKeys(ctx, s.db, keysOf(some))
		if err != nil {
			return err
		}
		kept := sold[:0]
		for _, i := range sold {
			if e, found := earlier[batch[i].p.key()]; found && batch[i].p.IdempotencyKey != "" {
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
