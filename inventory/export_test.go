package inventory

import (
	"context"
	"flashsale/lock/ladder"
)

// Waiting is how many orders wait in the queue of variant's lock on sku, for
// tests that form a batch by holding the lock while orders queue.
func Waiting(s *Service, variant, sku string) int {
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	if queue, ok := s.queues.queues[variant+" "+sku]; ok {
		return len(queue.waiting)
	}
	return 0
}

// SaleWriter returns the write of a sale of sku, with no lock and no read
// before it: the transaction every lock rung ends in (the stock and the
// order together), for the benchmark of what the store alone can write.
// Each call writes one order of one unit for user.
func SaleWriter(ctx context.Context, s *Service, sku string) (func(user string) error, error) {
	prod, err := s.product(ctx, s.db, sku)
	if err != nil {
		return nil, err
	}
	w := lockGuard{s}.rule()
	return func(user string) error {
		p := Purchase{SKU: sku, Qty: 1, User: user, Lock: ladder.None}
		order := newOrder(p, p.hash(), prod.PriceCents, 0, false)
		_, err := s.commitOrder(ctx, prod.Sale, prod.Stock, 0, false, w, &order)
		return err
	}, nil
}
