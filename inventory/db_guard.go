package inventory

import (
	"context"
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

// DBGuard is the design whose guard is one conditional write.
const DBGuard = "db-guard"

var dbGuardDesign = design{
	Design:  Design{Name: DBGuard, File: "inventory/db_guard.go", Correct: true},
	section: func(s *Service) section { return dbGuard{s} },
}

// dbGuard is db-guard's section: the lock rungs' read, check, work and
// write (sale.go, seats.go), the write made conditional. Production mode
// changes nothing here: the design is the guard and shows what it does
// alone.
type dbGuard struct{ s *Service }

// dbGuardRule is db-guard's write: its own answer when refused.
var dbGuardRule = writeRule{stock: writeGuarded, seatGuarded: true}

func (g dbGuard) sell(ctx context.Context, p purchase, lease *lock.Lease) (Order, bool, int64, error) {
	return g.s.buy(ctx, p, lease, dbGuardRule)
}

func (g dbGuard) book(ctx context.Context, r seatGrab, lease *lock.Lease) (Booking, bool, error) {
	return g.s.grab(ctx, r, lease, dbGuardRule)
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
