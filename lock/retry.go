package lock

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"time"

	"flashsale/internal/clock"
)

// retry is the wait the Redis distlock page describes: try; when the lock
// is busy (or too few nodes answered), wait a random delay and try again,
// so that clients that collided do not collide again, until ctx is done.
// The delay is drawn afresh each time, up to a bound that doubles from
// backoffMin to backoffMax (TTL/8 unless set). A crash is not retried.
func (l *Locker) retry(ctx context.Context, name string) (*Lease, int, error) {
	return l.waitLoop(ctx, name, &randomDelay{bound: l.cfg.backoffMin, max: l.cfg.backoffMax})
}

// waitLoop is Acquire's wait, with the speed layer on or off: try; return
// on success or an error not worth waiting out; when ctx is done, report;
// else keep what the try found, let w wait, and try again. It returns the
// lease, the tries made and the error.
func (l *Locker) waitLoop(ctx context.Context, name string, w waiter) (*Lease, int, error) {
	report := func() error {
		if err := w.Report(); err != nil {
			return err
		}
		return ErrNotAcquired
	}
	for tries := 0; ; {
		handed, ok := w.Next(ctx)
		switch {
		case handed != nil:
			return l.handedOver(ctx, handed, tries+1)
		case !ok:
			return nil, tries, errors.Join(report(), context.Cause(ctx))
		}
		lease, err := l.try(ctx, name)
		tries++
		switch {
		case err == nil:
			w.Took(lease)
			return lease, tries, nil
		case !retryable(err):
			return nil, tries, err
		case ctx.Err() != nil:
			return nil, tries, errors.Join(finalError(err, report()), context.Cause(ctx))
		}
		w.Found(errorToKeep(err, report()))
	}
}

// waiter is how waitLoop waits between tries: retry's random delay, or the
// speed layer's wake-ups (fast.Waiter).
type waiter interface {
	// Next waits until a try is worth making and reports true, or false
	// once ctx is done; a lease handed over meanwhile ends the wait.
	Next(ctx context.Context) (handed *Lease, ok bool)
	// Found notes what a failed try found, to tell if the wait runs out.
	Found(err error)
	// Report is what the waiter tells if its wait runs out now; nil: busy.
	Report() error
	// Took notes the lease a try took.
	Took(lease *Lease)
}

// randomDelay is retry's waiter: no wait before the first try, then a
// random delay up to bound, which doubles up to max after each.
type randomDelay struct {
	bound, max time.Duration
	tried      bool
	last       error
}

// Next sleeps the delay, but not before the first try.
func (d *randomDelay) Next(ctx context.Context) (*Lease, bool) {
	if !d.tried {
		d.tried = true
		return nil, true
	}
	if !clock.Sleep(ctx, rand.N(d.bound+1)) {
		return nil, false
	}
	d.bound = min(2*d.bound, d.max)
	return nil, true
}

// Found keeps what the last try found.
func (d *randomDelay) Found(err error) { d.last = err }

// Report is what the last try found.
func (d *randomDelay) Report() error { return d.last }

// Took keeps nothing: a lease taken ends the wait.
func (*randomDelay) Took(*Lease) {}

// retryable errors are worth waiting out: busy, or nodes not answering.
func retryable(err error) bool {
	return errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrUnavailable)
}

// finalError is what a wait that ended with the caller's context reports of
// its last try, err: its own error if a node really failed (refused the
// connection, say), else what the tries before it found. A try merely cut short by the
// deadline says nothing about Redis being down.
func finalError(err, before error) error {
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

// errorToKeep is what a waiter keeps of a failed try, to report if its wait
// runs out: the try's error, unless it is a single node's read cut short by
// the caller's deadline, which finalError would not report either (a busy
// process's read timing out is not Redis down), then what it kept before.
// The deadline's error can arrive a moment before ctx says it is done, and
// the try is then not the last.
func errorToKeep(err, before error) error {
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
