package lock

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"

	"flashsale/internal/clock"
)

// retry is the wait the Redis distlock page describes: try; when the lock
// is busy (or too few nodes answered), wait a random delay and try again,
// so that clients that collided do not collide again, until ctx is done.
// The delay is drawn afresh each time, up to a bound that doubles from
// backoffMin to backoffMax (TTL/8 unless set). A crash is not retried.
func (l *Locker) retry(ctx context.Context, name string) (*Lease, int, error) {
	bound := l.cfg.backoffMin
	var last error = ErrNotAcquired
	for tries := 1; ; tries++ {
		lease, err := l.try(ctx, name)
		switch {
		case err == nil || !retryable(err):
			return lease, tries, err
		case ctx.Err() != nil:
			return nil, tries, errors.Join(telling(err, last), context.Cause(ctx))
		}
		last = noted(err, last)
		if !clock.Sleep(ctx, rand.N(bound+1)) {
			return nil, tries, errors.Join(last, context.Cause(ctx))
		}
		bound = min(2*bound, l.cfg.backoffMax)
	}
}

// retryable errors are worth waiting out: busy, or nodes not answering.
func retryable(err error) bool {
	return errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrUnavailable)
}

// telling picks what to report for a try that ended with the caller's
// context: its own error if a node really failed (refused the connection,
// say), else what the tries before it found. A try merely cut short by the
// deadline says nothing about Redis being down.
func telling(err, before error) error {
	if !errors.Is(err, ErrUnavailable) {
		return before
	}
	if qe, ok := errors.AsType[*QuorumError](err); ok {
		for _, nodeErr := range qe.Failed {
			if !timedOut(nodeErr) {
				return err
			}
		}
		return before
	}
	if timedOut(err) {
		return before
	}
	return err
}

// noted is what a waiter keeps of a failed try, to tell if its wait runs
// out: the try's error, unless it is a single node's read cut short by the
// caller's deadline, which telling would not report either (a busy
// process's read timing out is not Redis down), then what it kept before.
// The deadline's error can arrive a moment before ctx says it is done, and
// the try is then not the last.
func noted(err, before error) error {
	if _, quorum := errors.AsType[*QuorumError](err); !quorum && errors.Is(err, ErrUnavailable) && timedOut(err) {
		return before
	}
	return err
}

// timedOut reports an error that only says time ran out: the context's, or
// the connection deadline the client derives from it.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
