package lock

import (
	"context"
	"fmt"
	"time"

	"flashsale/internal/fault"
)

// leaseChecked is a variant whose holder looks at its lease once more just
// before it writes (lua+check).
type leaseChecked interface {
	// check reports ErrNotHeld when the key no longer carries value.
	check(ctx context.Context, k keys, value string) error
}

// CheckBeforeWrite is the holder's last step before it writes what it
// computed under the lock. Every variant refuses here, with ErrLockLost, a
// lease the process knows is lost (Err): its watchdog found it gone, or,
// with the watchdog on, its validity has passed (a holder paused past it
// finds out here); writing anyway would be the app's mistake, not the
// rung's. A variant that checks its lease (lua+check) also refuses a lease
// whose validity has run out or whose key no longer carries the holder's
// value; the others ask nothing more, so without the watchdog a lease
// that ran out under its holder still writes, as taught. Then, for every
// variant, comes the fault.AfterLeaseCheck fault point: a pause there lands
// between the check and the write, the window no check can close (only
// fencing, where the store itself refuses the stale write).
func (l *Lease) CheckBeforeWrite(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return fmt.Errorf("check %q before writing: %w", l.name, err) // already ErrLockLost
	}
	if c, ok := l.locker.v.(leaseChecked); ok {
		if err := l.checkLease(ctx, c); err != nil {
			return fmt.Errorf("check %q before writing: %w", l.name, err)
		}
	}
	return l.Checkpoint(ctx, fault.AfterLeaseCheck)
}

// checkLease asks the cheap question first, what this process's clock
// says of the validity, then the node.
func (l *Lease) checkLease(ctx context.Context, c leaseChecked) error {
	if late := time.Since(l.ValidUntil()); late >= 0 {
		return fmt.Errorf("%w: its validity ran out %v ago", ErrLockLost, late.Round(time.Millisecond))
	}
	if err := c.check(ctx, l.k, l.value); err != nil {
		return fmt.Errorf("%w: %w", ErrLockLost, err)
	}
	return nil
}
