package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A request's budget.
//
// A sale may wait for several things before its lease: the store's reads
// that shed load before the lock (the product, an earlier order with the
// same Idempotency-Key), the SKU's batch queue, the lock's waiting line,
// the votes. The lock-wait budget (Config.LockWait) is one deadline, set
// when the sale begins and carried to each of them, not a fresh timeout
// per wait: however the waiting is split, a request that cannot be served
// is answered busy by the deadline. What is never cut short is the
// critical section once the lease is held: its business work, its fault
// points (an injected pause must freeze the holder for as long as the
// lesson needs) and its write, which commits or rolls back whole. So an
// answer comes at most one critical section after the deadline.

// budget is the deadline of a sale that begins now.
func (s *Service) budget() time.Time { return time.Now().Add(s.lockWait) }

// waiting bounds ctx by the budget's deadline, for the waits before the
// lease; the request's own context still ends it earlier if the shopper
// goes.
func waiting(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, deadline)
}

// overBudget says busy for a wait that the budget cut short (not the
// shopper, whose own context ended nothing), and passes any other error on.
func (s *Service) overBudget(ctx context.Context, err error, what string) error {
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %s: the %v budget ran out: %w", ErrLockBusy, what, s.lockWait, err)
}
