package lock

import (
	"context"
	"errors"
)

// A try whose answer never came back may still have written its value: the
// single-node rungs delete it with their own compare-and-delete, as
// Redlock's step 5 does on every node (docs/design.md, "Waiting for a busy
// lock").

// abandon deletes value from k in the background after a try that failed
// with err, if the try may have written it (no answer: ErrUnavailable; an
// answer too late: errNodeLate) and
// the variant's release is a compare-and-delete that does not already run.
// The delete has a TTL of its own to reach the node, whatever the caller's
// context: a caller that gave up must not stop it. then, if set, runs once
// the delete has been tried.
func (l *Locker) abandon(ctx context.Context, k keys, value string, err error, then func()) {
	if !errors.Is(err, ErrUnavailable) && !errors.Is(err, errNodeLate) {
		return
	}
	if !l.rung.OwnerChecked || l.rung.SelfUndoing {
		return
	}
	l.detached(ctx, func(ctx context.Context) {
		_ = l.v.release(ctx, noFaultPoints, k, value)
		if then != nil {
			then()
		}
	})
}
