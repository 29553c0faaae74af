package inventory

import (
	"context"

	"flashsale/lock"
)

// lockGuard is a lock rung's section: the Redis lock is the guard, so the
// store writes what the holder read (stock read − qty), where the row still
// carries the holder's token when the lease is fenced. Production mode adds
// db-guard's conditions as defence in depth: a write they refuse is a lock
// failure the database caught.
type lockGuard struct{ s *Service }

func (g lockGuard) sell(ctx context.Context, p purchase, lease *lock.Lease) (Order, bool, int64, error) {
	return g.s.buy(ctx, p, lease, g.rule())
}

func (g lockGuard) book(ctx context.Context, r seatGrab, lease *lock.Lease) (Booking, bool, error) {
	return g.s.grab(ctx, r, lease, g.rule())
}

// rule is how a lock rung's sale writes: what it read in workshop mode,
// guarded in production mode. A booking needs no condition of its own
// there: production's unique seat index catches a second one.
func (g lockGuard) rule() writeRule {
	if g.s.production {
		return writeRule{stock: writeGuarded, caught: true}
	}
	return writeRule{stock: writeRead}
}
