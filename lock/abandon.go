package lock

import (
	"context"
	"errors"
)

// A try whose answer never came back.
//
// When a caller gives up while its SET NX (or the fenced script, or a
// hand-over's script) is in flight, the node still runs it: the key may now
// carry a value that nobody holds, busy for a whole TTL. Redlock undoes a
// failed try on every node (redlock.go, step 5); the single-node rungs do
// the same here, in the machinery beneath them rather than in each rung
// file, because it is the same for all of them and is not what a rung
// teaches: after a try that failed without a definite answer, the value the
// try wrote, if it got there, is deleted by the compare-and-delete of the
// rung's own release, so no other holder's key is ever touched. Only
// owner-checked rungs do it: a broken rung's release would delete whatever
// is there. A busy answer (ErrNotAcquired) wrote nothing and leaves nothing
// to undo; a crash (ErrCrashed) is a dead process, which undoes nothing.

// selfUndoing is a variant that already deletes its value everywhere
// after a try that failed (redlock and redlock+fence, in step 5).
type selfUndoing interface{ undoesItsFailedTries() }

// undoesItsFailedTries: step 5 unlocks every node after a failed try.
func (*redlock) undoesItsFailedTries() {}

// abandon deletes value from k in the background after a try that failed
// with err, if the try may have written it (no answer: ErrUnavailable; an
// answer too late: ErrNodeLate) and
// the variant's release is a compare-and-delete that does not already run.
// The delete has a TTL of its own to reach the node, whatever the caller's
// context: a caller that gave up must not stop it. then, if set, runs once
// the delete has been tried.
func (l *Locker) abandon(ctx context.Context, k keys, value string, err error, then func()) {
	if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNodeLate) {
		return
	}
	if _, owner := l.v.(ownerChecked); !owner {
		return
	}
	if _, done := l.v.(selfUndoing); done {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ttl)
		defer cancel()
		_ = l.v.release(ctx, noGap, k, value)
		if then != nil {
			then()
		}
	}()
}
