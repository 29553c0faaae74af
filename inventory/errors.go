package inventory

import (
	"errors"
	"fmt"
)

// Errors callers branch on with errors.Is; the HTTP layer maps each to one
// status and message.
var (
	// ErrUnknownSKU means no product has the SKU.
	ErrUnknownSKU = errors.New("unknown sku")
	// ErrUnknownEvent means no event has the name.
	ErrUnknownEvent = errors.New("unknown event")
	// ErrUnknownSeat means the event has no seat with the label.
	ErrUnknownSeat = errors.New("unknown seat")
	// ErrInvalidUser means the user name is missing, too long or not text.
	ErrInvalidUser = errors.New("invalid user")
	// ErrInvalidQty means the quantity is not between 1 and MaxQty.
	ErrInvalidQty = errors.New("invalid qty")
	// ErrInvalidKey means the Idempotency-Key is too long or not visible ASCII.
	ErrInvalidKey = errors.New("invalid idempotency key")
	// ErrSoldOut means the stock read under the lock is less than asked.
	ErrSoldOut = errors.New("sold out")
	// ErrSeatTaken means the seat already has a booking.
	ErrSeatTaken = errors.New("seat taken")
	// ErrStaleFence means the holder's fencing token is older than one the
	// row has seen: its lease ran out and someone else holds the lock now.
	ErrStaleFence = errors.New("stale fencing token")
	// ErrSaleReset means the sale was reset while the request was in
	// flight: its write belonged to the old sale and was refused.
	ErrSaleReset = errors.New("sale reset while the request was in flight")
	// ErrIdempotencyKeyReused means the key came with a different request.
	ErrIdempotencyKeyReused = errors.New("idempotency key reused with a different request")
	// ErrLockBusy means the lock was not obtained within the wait budget.
	ErrLockBusy = errors.New("lock busy")
	// ErrLineTooLong is ErrLockBusy said at once: the waiters already in
	// line would keep the request waiting past a third of its budget.
	ErrLineTooLong = fmt.Errorf("%w: the line is longer than the wait", ErrLockBusy)
	// ErrLockUnavailable means too few Redis nodes answered to decide.
	ErrLockUnavailable = errors.New("lock unavailable")
	// ErrHolderCrashed means an injected crash abandoned the request; the lock
	// was left as a dead process leaves it.
	ErrHolderCrashed = errors.New("holder crashed")
	// ErrStoreUnavailable means the database could not be reached: a
	// connection refused, reset or closed, a server shutting down, a file
	// that cannot be opened; or, for a lease holder, a store step that had
	// no answer within its time (budget.go). It is neither bad input nor a
	// bug; the same request may be tried again shortly.
	ErrStoreUnavailable = errors.New("store unavailable")
	// ErrLeaseLost means the holder's check just before its write found its
	// lease gone (lua+check): nothing was written.
	ErrLeaseLost = errors.New("lease lost before the write")
)
