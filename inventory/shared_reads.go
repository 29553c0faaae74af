package inventory

import (
	"context"
	"sync"
	"time"
)

// The reads before the lock, shared.
//
// Before a batched order queues for its SKU's lease it reads the product
// (to shed it at once when the SKU is sold out, and to note the sale it
// began in) and looks its Idempotency-Key up (a retry is answered without
// the lock). Alone, that is two queries per order, and in a flash sale
// they were a third of an instance's CPU: the orders the instance admitted
// queued for the store's read connections, and the lock's hand-offs waited
// for the cores behind them.
//
// So the orders for one SKU that arrive while a read of it is on its way
// share the next one: one product read and one query for all their keys.
// A round gathers the orders that arrive until its read starts, so every
// order's read still begins after the order arrived, as its own read would
// have: it never gets an answer older than itself (a sale reset or a
// restock just before it is seen). At a quiet hour a round is one order
// and the cost is what it was; in a spike a round is what arrived during
// one read, and the store does two queries per round, not per order.
//
// Only the batched path shares: an unbatched sale is the lesson's code,
// and reads alone, as taught.

// maxShared bounds the orders of one round: their keys go into one query,
// and a database bounds a statement's parameters. An order that finds its
// round full reads alone.
const maxShared = 500

// sharedReads are the rounds of the reads before the lock, by SKU.
type sharedReads struct {
	mu        sync.Mutex
	gathering map[string]*readRound // the round that takes orders until its read starts
	reading   map[string]bool       // a read of the SKU is on its way
}

// readRound is one shared read of a SKU: the product and the orders its
// members' Idempotency-Keys already made. done closes when it is read.
type readRound struct {
	keys     []userKey
	deadline time.Time // the latest of its members' budgets
	members  int

	done   chan struct{}
	prod   Product
	orders map[userKey]Order
	err    error
}

// join puts an order with key k (empty key: none) and budget deadline in
// the SKU's gathering round. lead reports that no read of the SKU is on its
// way: the caller must read the round now (Service.lead). A nil round means
// the gathering one is full: read alone.
func (r *sharedReads) join(sku string, k userKey, deadline time.Time) (round *readRound, lead bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gathering == nil {
		r.gathering, r.reading = map[string]*readRound{}, map[string]bool{}
	}
	round = r.gathering[sku]
	if round == nil {
		round = &readRound{done: make(chan struct{})}
		r.gathering[sku] = round
	}
	if round.members == maxShared {
		return nil, false
	}
	round.members++
	if k.key != "" {
		round.keys = append(round.keys, k)
	}
	if deadline.After(round.deadline) {
		round.deadline = deadline
	}
	lead = !r.reading[sku]
	r.reading[sku] = true
	return round, lead
}

// next takes the SKU's gathering round for reading, or, with none, notes
// that no read of the SKU is on its way any more.
func (r *sharedReads) next(sku string) *readRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	round := r.gathering[sku]
	delete(r.gathering, sku)
	if round == nil {
		delete(r.reading, sku)
	}
	return round
}

// sharedRead is the reads before the lock of a batched order, within ctx:
// the product, and the order p's key already made, if any (found), refused
// if another request made it.
func (s *Service) sharedRead(ctx context.Context, p purchase) (prod Product, earlier Order, found bool, err error) {
	k := p.key()
	round, lead := s.ahead.join(p.SKU, k, p.deadline)
	switch {
	case round == nil:
		return s.readAlone(ctx, p)
	case lead:
		s.lead(p.SKU)
	}
	select {
	case <-round.done:
	case <-ctx.Done():
		return Product{}, Order{}, false, context.Cause(ctx)
	}
	if round.err != nil {
		return Product{}, Order{}, false, round.err
	}
	earlier, found = round.orders[k]
	if found {
		if err := reused(earlier.fingerprint(), p.hash, k.key); err != nil {
			return Product{}, Order{}, false, err
		}
	}
	return round.prod, earlier, found, nil
}

// readAlone is the reads before the lock of one order, on its own.
func (s *Service) readAlone(ctx context.Context, p purchase) (Product, Order, bool, error) {
	prod, err := s.product(ctx, s.reads, p.SKU)
	if err != nil {
		return Product{}, Order{}, false, err
	}
	earlier, found, err := s.orderByKey(ctx, s.reads, p.User, p.IdempotencyKey, p.hash)
	return prod, earlier, found, err
}

// lead reads the SKU's gathering round, which holds the leader's order, on
// the leader's goroutine: at a quiet hour an order reads for itself alone,
// as it did before rounds. The rounds that gather meanwhile are read on a
// goroutine of their own, so the leader is answered as soon as its round
// is read.
func (s *Service) lead(sku string) {
	s.readRound(sku, s.ahead.next(sku))
	if more := s.ahead.next(sku); more != nil {
		go func() {
			for round := more; round != nil; round = s.ahead.next(sku) {
				s.readRound(sku, round)
			}
		}()
	}
}

// readRound reads one round. Its context is nobody's request: the read
// serves every member, so it ends at the latest member's budget, and a
// member whose own request ends stops waiting for it (sharedRead).
func (s *Service) readRound(sku string, round *readRound) {
	ctx, cancel := context.WithDeadline(context.Background(), round.deadline)
	defer cancel()
	round.prod, round.err = s.product(ctx, s.reads, sku)
	if round.err == nil {
		round.orders, round.err = ordersByKeys(ctx, s.reads, round.keys)
	}
	close(round.done)
}
