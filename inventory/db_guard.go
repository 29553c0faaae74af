package inventory

import (
	"fmt"

	"flashsale/lock"
)

// db-guard: the sale without any lock. A lock rung writes what its holder
// read (stock read − qty; store_writes.go), so only the lock keeps two
// holders apart; db-guard writes one conditional statement instead, which the database applies
// atomically whoever else is writing:
//
//	UPDATE products SET stock = stock - ? WHERE sku = ? AND sale = ? AND stock >= ?
//	UPDATE seats SET booked = TRUE WHERE event_id = ? AND label = ? AND sale = ? AND booked = FALSE
//
// A decrement that would go below zero, or a second booking of a seat,
// changes no row and is refused: 409, never an oversell, with no Redis at
// all. It costs one row lock for the length of one statement. What it
// cannot do is keep work outside the database (a payment call) from running
// twice: two buyers of the last unit both do their work, and only then does
// one of them find the stock gone.

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

// writeFor is how locker's sales write. Production mode guards the lock
// rungs' writes; it changes nothing for the store-guarded rungs, which are
// the guard themselves and must show what they do alone.
func (s *Service) writeFor(locker *lock.Locker) stockWrite {
	switch guardOf(locker) {
	case guardConditional:
		return writeGuarded
	case guardRedisStock:
		return writeInPlace
	}
	if s.production {
		return writeGuarded
	}
	return writeRead
}

// caught reports whether a refused guarded write is a lock failure the
// database caught (production mode under a lock rung), not the design's
// own answer.
func (s *Service) caught(locker *lock.Locker) bool {
	return s.production && guardOf(locker) == guardLock
}

// guardedDecrement is db-guard's stock write: qty off the SKU's row in
// place, and only while the row still has qty. The database applies it
// atomically, so a decrement that would go below zero changes no row, and
// refused is the answer then.
func guardedDecrement(sku string, sale, qty int64) (q string, args []any, refused error) {
	return "UPDATE products SET stock = stock - ? WHERE sku = ? AND sale = ? AND stock >= ?", []any{qty, sku, sale, qty},
		fmt.Errorf("%w: %s (the database guard refused the decrement)", ErrSoldOut, sku)
}

// guardedBooking adds db-guard's condition to the seat write q: the seat is
// not booked yet, so a second booking changes no row and is refused.
func guardedBooking(q string, args []any, b *Booking) (string, []any, error) {
	return q + " AND booked = ?", append(args, false),
		fmt.Errorf("%w: %s %s (the database guard refused a second booking)", ErrSeatTaken, b.EventID, b.Seat)
}
