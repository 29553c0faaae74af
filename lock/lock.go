// Package lock provides per-key Redis locks: the single-node lock (Lua:
// SET NX PX, released by a compare-and-delete) and Redlock over independent
// nodes (Redlock), each plain or with fencing tokens the store checks
// (LuaFence, RedlockFence). A Client builds a Locker for each over one set of
// nodes, so a caller can pick one by name at run time; Options.Rungs adds
// protocols of its own under their names (the workshop's ladder of broken
// patterns registers that way, from package ladder).
//
// Each protocol is a short file that reads as its algorithm. Beside them is
// the speed layer (Options.FastOff), which decides who tries next and when
// and never grants: switched off, what runs is exactly the protocols.
package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"flashsale/internal/clock"
	"flashsale/internal/fault"
	"flashsale/internal/randhex"
	"flashsale/lock/internal/fast"
)

// Locker hands out leases on named keys with one variant.
type Locker struct {
	variant rung
	v       protocol
	cfg     *config
	wake    *waker
	reach   func(ctx context.Context) error // do the nodes this variant needs answer now?
	// prefix is the keys of the empty name: a name's keys are these with
	// the name appended (package keys' layout).
	prefix keys
}

// waker is the speed layer of one set of lockers.
type waker = fast.Waker[*Lease]

// TryAcquire makes exactly one attempt. It fails with ErrNotAcquired when the
// lock is held, ErrUnavailable when too few nodes answered, or with the
// error Options.Trace's Step hook ended it with.
func (l *Locker) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	start := time.Now()
	lease, err := l.try(ctx, name)
	if l.cfg.trace.Acquire != nil {
		l.observeAcquire(name, 1, start, lease, err)
	}
	return lease, err
}

// Acquire waits for the lock until ctx is done, trying again whenever the
// lock is busy or too few nodes answer: after a random delay with the speed
// layer off, when the speed layer expects the lock free with it on. A
// cancelled or timed-out wait returns errors.Join(ErrNotAcquired, ctx.Err()).
//
// The wait is the one the Redis distlock page describes: try; return on
// success or on an error not worth waiting out; else keep what the try
// found, let the waiter wait, try again.
func (l *Locker) Acquire(ctx context.Context, name string) (lease *Lease, err error) {
	start, tries := time.Now(), 0
	var w waiter
	if l.cfg.fast.Load() {
		q := l.wake.Wait(l.prefix.lock+name, l, l.variant.OwnerChecked)
		defer func() { q.Close(lease) }()
		w = q
	} else {
		w = &randomDelay{bound: l.cfg.backoffMin, max: l.cfg.backoffMax}
	}
	if l.cfg.trace.Acquire != nil {
		defer func() { l.observeAcquire(name, tries, start, lease, err) }()
	}
	report := func() error {
		if err := w.Report(); err != nil {
			return err
		}
		return ErrNotAcquired
	}
	for {
		handed, ok := w.Next(ctx)
		switch {
		case handed != nil:
			tries++
			return l.handedOver(ctx, handed)
		case !ok:
			return nil, l.outOfTime(ctx, report())
		}
		lease, err = l.try(ctx, name)
		tries++
		switch {
		case err == nil:
			return lease, nil
		case !retryable(err):
			return nil, err
		case ctx.Err() != nil:
			return nil, l.outOfTime(ctx, finalError(err, report()))
		}
		w.Found(errorToKeep(err, report()))
	}
}

// handedOver is a lease a releaser here handed over during the wait. It
// meets the after-acquire fault point as its own acquire would have, and a
// validity-checked variant's lease is refused if its validity ran out on
// the way.
func (l *Locker) handedOver(ctx context.Context, lease *Lease) (*Lease, error) {
	if err := lease.step(ctx, fault.AfterAcquireStep1); err != nil {
		return nil, err
	}
	if l.variant.ValidityChecked && !time.Now().Before(lease.ValidUntil()) {
		lease.releaseLater(ctx)
		return nil, fmt.Errorf("%w: the lease ran out before it was handed over", ErrNotAcquired)
	}
	return lease, nil
}

// outOfTime is what a wait that ctx ended reports, given what its tries
// found: a node that failed during the wait but answers now was busy, not
// down.
func (l *Locker) outOfTime(ctx context.Context, found error) error {
	if errors.Is(found, ErrUnavailable) && l.reachable(ctx) {
		return errors.Join(ErrNotAcquired, context.Cause(ctx))
	}
	return errors.Join(found, context.Cause(ctx))
}

// waiter is how Acquire waits between tries: a random delay, or the speed
// layer's wake-ups (fast.Waiter).
type waiter interface {
	Next(ctx context.Context) (handed *Lease, ok bool) // false once ctx is done
	Found(err error)                                   // what a failed try found
	Report() error                                     // what to tell if the wait runs out now; nil: busy
}

// randomDelay is the taught waiter: no wait before the first try, then a
// random delay up to bound, which doubles up to max after each, so clients
// that collided do not collide again.
type randomDelay struct {
	bound, max time.Duration
	tried      bool
	last       error
}

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

func (d *randomDelay) Found(err error) { d.last = err }
func (d *randomDelay) Report() error   { return d.last }

// try is one attempt of the variant, with a new random owner value: 128
// bits, so no other client can produce it by accident.
func (l *Locker) try(ctx context.Context, name string) (*Lease, error) {
	k := keys{lock: l.prefix.lock + name, fence: l.prefix.fence + name}
	value := randhex.String(16)
	start := time.Now()
	g, err := l.v.acquire(ctx, l.steps(name, nil), k, value, l.cfg.ttl)
	if err != nil {
		l.abandon(ctx, k, value, err, nil) // the SET may have landed all the same
		return nil, err
	}
	return l.newLease(name, k, value, g, start), nil
}

// newLease is the lease of a grant whose first command was sent at start.
func (l *Locker) newLease(name string, k keys, value string, g grant, start time.Time) *Lease {
	lease := &Lease{
		locker: l, name: name, k: k, value: value,
		token: g.token, validUntil: start.Add(g.validity), acquired: time.Now(),
		lost: make(chan struct{}),
	}
	if l.cfg.watchdog.Load() {
		lease.startWatchdog()
	}
	return lease
}

// steps are the fault points of one operation of l on name, told to the
// trace's Step hook; lease is nil before the lease exists. The hook runs
// under the lease's hold, as the watchdog extends, so a pause stalls the
// watchdog too; an error is a crash there, and the lease is dropped as a
// dead holder's would be.
func (l *Locker) steps(name string, lease *Lease) faultPoints {
	if l.cfg.trace.Step == nil {
		return noFaultPoints
	}
	return func(ctx context.Context, p fault.Point) error {
		if lease != nil {
			lease.hold.Lock()
			defer lease.hold.Unlock()
		}
		err := l.cfg.trace.Step(ctx, Event{Time: time.Now(), Variant: l.variant.Name, Key: name, Point: p, Lease: lease})
		if err == nil {
			return nil
		}
		if lease != nil && ctx.Err() == nil { // not a pause the caller cut short
			lease.crashed()
		}
		return fmt.Errorf("at %s: %w", p, err)
	}
}

// abandon deletes value from k in the background after a try that failed
// with err but may have written it (no answer, or a late one), as Redlock's
// step 5 does, where the variant's release is a compare-and-delete. then,
// if set, runs once the delete has been tried.
func (l *Locker) abandon(ctx context.Context, k keys, value string, err error, then func()) {
	if !errors.Is(err, ErrUnavailable) && !errors.Is(err, errNodeLate) {
		return
	}
	if !l.variant.OwnerChecked || l.variant.SelfUndoing {
		return
	}
	l.detached(ctx, func(ctx context.Context) {
		_ = l.v.release(ctx, noFaultPoints, k, value)
		if then != nil {
			then()
		}
	})
}

// detached runs fn off the caller's path with a TTL of its own, whatever
// the caller's ctx.
func (l *Locker) detached(ctx context.Context, fn func(ctx context.Context)) {
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ttl)
		defer cancel()
		fn(ctx)
	}()
}

// ExpectedWait is how long an Acquire of name that starts now can expect to
// wait behind this process's waiters, at the pace they have lately been
// served; zero when nobody waits, before the pace is known, or with the
// speed layer off. A caller whose budget is shorter can answer busy at once.
func (l *Locker) ExpectedWait(name string) time.Duration {
	if !l.cfg.fast.Load() {
		return 0
	}
	return l.wake.ExpectedWait(l.prefix.lock + name)
}

// reachable reports whether the nodes this variant needs answer now, asked
// under a short timeout of its own: the caller's context is already done.
func (l *Locker) reachable(ctx context.Context) bool {
	if l.reach == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 250*time.Millisecond)
	defer cancel()
	return l.reach(ctx) == nil
}

// observeAcquire tells the trace's Acquire hook, which must be set, how an
// acquire of name that began at start ended.
func (l *Locker) observeAcquire(name string, tries int, start time.Time, lease *Lease, err error) {
	l.cfg.trace.Acquire(Event{Time: time.Now(), Variant: l.variant.Name, Key: name, Tries: tries, Wait: time.Since(start), Lease: lease, Err: err})
}

// observe tells hook, if set, of an operation on lease that began at begun
// and ended with err.
func (l *Locker) observe(hook func(Event), lease *Lease, begun time.Time, err error) {
	if hook == nil {
		return
	}
	hook(Event{Time: begun, Variant: l.variant.Name, Key: lease.name, Lease: lease, Err: err})
}
