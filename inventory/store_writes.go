package inventory

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// The store's writes. Every design writes its order and booking here, in
// one transaction with the stock or seat, as its guard's writeRule says;
// every write names the sale the request began in, and a fenced holder's
// also its token.

// stockWrite is how a sale writes its stock.
type stockWrite int

const (
	// writeRead writes the stock the holder read minus qty: the lock is
	// the guard (a read-modify-write two holders can interleave).
	writeRead stockWrite = iota
	// writeGuarded decrements in place and only while stock suffices:
	// db-guard as the whole design, and -production's defence in depth.
	writeGuarded
	// writeInPlace decrements in place without a check: redis-stock, whose
	// reservation in Redis is the guard (redis_stock.go).
	writeInPlace
)

// writeRule is how a guard's sale writes: its stock; seatGuarded adds
// db-guard's condition that the seat is not booked yet; caught marks a
// guarded write refused as a lock failure the database caught
// (-production under a lock rung), not the design's own answer.
type writeRule struct {
	stock       stockWrite
	seatGuarded bool
	caught      bool
}

// commitOrder writes the new stock and the orders (one, or a batch's, all
// of one SKU) in one transaction and returns the stock after it, written as
// w says; a fenced holder writes only where the row still carries its
// token.
//
// Every write also names the sale the request began in: a request in flight
// across a reset writes nothing.
func (s *Service) commitOrder(ctx context.Context, sale, read int64, token uint64, fenced bool, w writeRule, os ...*Order) (int64, error) {
	sku, qty := os[0].SKU, totalQty(os)
	after := read - qty
	// A shopper hanging up now does not stop the write (the transaction is
	// atomic either way); its store step's time does (inStore).
	err := s.holderTx(ctx, "writing "+sku, func(tx *gorm.DB) error {
		q, args := "UPDATE products SET stock = ? WHERE sku = ? AND sale = ?", []any{after, sku, sale}
		var guardErr error
		switch w.stock {
		case writeGuarded:
			q, args, guardErr = guardedDecrement(sku, sale, qty)
		case writeInPlace:
			q, args = "UPDATE products SET stock = stock - ? WHERE sku = ? AND sale = ?", []any{qty, sku, sale}
		}
		r := refusal{table: "products", where: "sku = ?", id: []any{sku}, sale: sale, token: token, fenced: fenced, guardErr: guardErr, caught: w.caught}
		if err := s.conditional(tx, "write stock", q, args, r); err != nil {
			return err
		}
		if w.stock != writeRead {
			var now Product
			if err := tx.Select("stock").Where("sku = ?", sku).Take(&now).Error; err != nil {
				return fmt.Errorf("read stock: %w", err)
			}
			after = now.Stock
		}
		return insert(tx, &os, "order")
	})
	return after, err
}

// commitBooking inserts the booking and marks the seat booked. First, in the
// same transaction, it proves that the seat row still belongs to the sale
// the request began in and, for a fenced holder, still carries its token;
// on PostgreSQL that also locks the row against a reset until the booking
// is in. w.seatGuarded (db-guard) adds the condition that the seat is not
// booked yet.
func (s *Service) commitBooking(ctx context.Context, b *Booking, sale int64, token uint64, fenced bool, w writeRule) error {
	return s.holderTx(ctx, "booking "+b.EventID+" "+b.Seat, func(tx *gorm.DB) error {
		q, args := "UPDATE seats SET booked = ? WHERE event_id = ? AND label = ? AND sale = ?", []any{true, b.EventID, b.Seat, sale}
		var guardErr error
		if w.seatGuarded {
			q, args, guardErr = guardedBooking(q, args, b)
		}
		r := refusal{table: "seats", where: "event_id = ? AND label = ?", id: []any{b.EventID, b.Seat},
			sale: sale, token: token, fenced: fenced, guardErr: guardErr, caught: w.caught}
		if err := s.conditional(tx, "check seat", q, args, r); err != nil {
			return err
		}
		return insert(tx, b, "booking")
	})
}

// holderTx runs a lease holder's write, fn, in one transaction, as a store
// step of its own (inStore) that the shopper's going does not cut short.
func (s *Service) holderTx(ctx context.Context, what string, fn func(tx *gorm.DB) error) error {
	return s.inStore(context.WithoutCancel(ctx), what, func(conn *gorm.DB) error {
		return storeUnavailable(conn.Transaction(fn))
	})
}

// transaction runs fn in one transaction. Its statements mark an
// unreachable database themselves (watchStore); the begin and the commit
// are marked here.
func (s *Service) transaction(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return storeUnavailable(s.db.WithContext(ctx).Transaction(fn))
}

// insert creates an order or booking row; a unique violation (the
// idempotency key, or -production's seat index) comes back unwrapped for
// the caller to resolve.
func insert(tx *gorm.DB, row any, what string) error {
	if err := tx.Create(row).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return err
		}
		return fmt.Errorf("insert %s: %w", what, err)
	}
	return nil
}

// refusal is what explains a conditional write that changed no row: the
// row (table, where, id), the sale the request began in, the holder's
// fencing token when fenced, and the guard's answer (guardErr, nil when the
// write had no guard; caught when it is -production's defence in depth).
type refusal struct {
	table, where string
	id           []any
	sale         int64
	token        uint64
	fenced       bool
	guardErr     error
	caught       bool
}

// conditional runs a write of one row, adding the fence condition for a
// fenced holder, and explains a write that changed no row.
func (s *Service) conditional(tx *gorm.DB, what, q string, args []any, r refusal) error {
	if r.fenced {
		q, args = q+" AND fence = ?", append(args, int64(r.token))
	}
	res := tx.Exec(q, args...)
	if res.Error != nil {
		return fmt.Errorf("%s: %w", what, res.Error)
	}
	if res.RowsAffected == 0 {
		return s.refused(tx, r)
	}
	return nil
}

// refused explains a conditional write that changed no row: the row gone or
// belonging to a newer sale (a reset while the request was in flight), else a
// newer fencing token on the row (stale holder), else the guard: a lock
// failure the database caught when caught (-production), db-guard's own
// answer otherwise.
func (s *Service) refused(tx *gorm.DB, r refusal) error {
	table, id, token := r.table, r.id, r.token
	var row struct{ Fence, Sale int64 }
	err := tx.Table(table).Select("fence", "sale").Where(r.where, id...).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound) || err == nil && row.Sale != r.sale:
		s.log.Warn("a write from before a reset refused", "table", table, "row", id, "sale", r.sale)
		return fmt.Errorf("%w: %s %v", ErrSaleReset, table, id)
	case err != nil:
		return fmt.Errorf("read %s: %w", table, err)
	case r.fenced && row.Fence != int64(token):
		s.stats.StaleFence.Add(1)
		s.log.Warn("stale fencing token refused at write", "table", table, "row", id, "token", token, "row_fence", row.Fence)
		return fmt.Errorf("%w: token %d, but %s %v carries %d", ErrStaleFence, token, table, id, row.Fence)
	case r.guardErr != nil && r.caught:
		s.stats.GuardRejections.Add(1)
		s.log.Warn("database guard caught a write the lock let through", "table", table, "row", id)
		return r.guardErr
	case r.guardErr != nil:
		return r.guardErr
	}
	return fmt.Errorf("%s %v: the write changed no row", table, id)
}

// totalQty is the units the orders take.
func totalQty(os []*Order) int64 {
	var n int64
	for _, o := range os {
		n += o.Qty
	}
	return n
}
