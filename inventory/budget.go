package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
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

// A holder's store steps.
//
// Once the lease is held the sale's reads and its write still wait for the
// store: on SQLite for the process's one write connection, which
// database/sql hands to a waiter picked at random, so in a crowd of holders
// one may wait for ever (every sale of none is a holder at once: it has no
// lock to queue on); then a write waits for the file's write lock, which
// the other instances share and which SQLite's busy timeout (10 s) waits
// for whatever the context says. Unbounded, those waits kept a sale past
// its shopper's patience while the machine was slow or another instance
// held the write lock. So each store step of a holder (its reads, then its
// write) has a time of its own, storeTimeout, counted from when the step
// begins, not from the budget's deadline: an injected pause between the
// reads and the write still freezes the holder as long as the lesson
// needs, and the write after it still gets its whole time. A step cut
// short leaves nothing behind (the write is one transaction, and
// database/sql never cancels a commit under way) and the sale is answered
// store unavailable. An answer so comes at most the deadline, two
// storeTimeouts (three when a twin's unique violation is read back), the
// work with its pauses and the release after the sale began.
const storeTimeout = 2 * time.Second

// storeStep bounds ctx for one store step of a lease holder.
func storeStep(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, storeTimeout)
}

// storeLate says store unavailable for a step whose storeTimeout (step)
// ran out, or whose write lock SQLite's busy timeout gave up on, and
// passes any other error on.
func storeLate(step context.Context, err error, what string) error {
	late := errors.Is(err, context.DeadlineExceeded) && errors.Is(step.Err(), context.DeadlineExceeded)
	if err == nil || !late && !lockTimedOut(err) {
		return err
	}
	return fmt.Errorf("%w: %s: no answer within %v: %w", ErrStoreUnavailable, what, storeTimeout, err)
}

// inStore runs fn, a store step of a lease holder that writes, on one
// connection of the store taken within storeTimeout, with its waits for
// SQLite's write lock bounded by storeTimeout too (the busy timeout, which
// no context interrupts) and its statements by the step's context.
func (s *Service) inStore(ctx context.Context, what string, fn func(conn *gorm.DB) error) error {
	sctx, cancel := storeStep(ctx)
	defer cancel()
	err := s.db.WithContext(sctx).Connection(func(conn *gorm.DB) error {
		conn = conn.WithContext(sctx) // a session: each statement on it starts afresh
		if conn.Dialector.Name() == "sqlite" {
			var was int64
			if err := conn.Raw("PRAGMA busy_timeout").Scan(&was).Error; err != nil {
				return err
			}
			if err := conn.Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", storeTimeout.Milliseconds())).Error; err != nil {
				return err
			}
			defer conn.WithContext(context.WithoutCancel(sctx)).Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", was))
		}
		return fn(conn)
	})
	return storeLate(sctx, storeUnavailable(err), what)
}
