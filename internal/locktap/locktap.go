// Package locktap is the application's side of the lock's trace
// (lock.Trace): the fault plan the workshop injects, and one stream of
// events (every acquire, release, extension, lost lease and fired fault)
// for the metrics, the lease history and the workshop's timeline of
// holders.
package locktap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"flashsale/internal/clock"
	"flashsale/internal/fault"
	"flashsale/lock"
)

// Kind says what happened to a lock.
type Kind string

// Event kinds.
const (
	Acquired    Kind = "acquired"
	Busy        Kind = "busy"        // not acquired: held by another client
	Unavailable Kind = "unavailable" // not acquired: too few nodes answered
	Crashed     Kind = "crashed"     // abandoned by an injected crash
	Released    Kind = "released"
	Lost        Kind = "lost"     // the watchdog could not keep the lease
	Extended    Kind = "extended" // the watchdog sent an extend (Time: when)
	FaultFired  Kind = "fault"
)

// Event is one thing that happened to a lock, as the observer hears it.
type Event struct {
	Time    time.Time
	Kind    Kind
	Variant string
	Key     string
	Tries   int           // acquire attempts (Acquired, Busy, Unavailable)
	Wait    time.Duration // time spent acquiring
	Lease   *lock.Lease   // the lease concerned, nil when there is none
	Fault   *fault.Fault  // the fault that fired (FaultFired)
	Err     error
}

// Tap is what the application hangs on a set of lockers: its fault plan
// (nil: none fires) and its observer (nil: none).
type Tap struct {
	Faults   *fault.Plan
	Observer func(Event)
}

// Tapped is o with t's plan and observer as its trace.
func Tapped(o lock.Options, t Tap) lock.Options {
	o.Trace = t.Trace()
	return o
}

// Trace is t as the lock's hooks: only the hooks t needs are set, so a
// tap with neither plan nor observer costs the lock nothing.
func (t Tap) Trace() *lock.Trace {
	tr := &lock.Trace{}
	if t.Faults != nil {
		tr.Step = t.step
	}
	if t.Observer == nil {
		return tr
	}
	tr.Acquire = func(e lock.Event) { t.Observer(acquired(e)) }
	tr.Release = t.as(Released)
	tr.Extend = t.as(Extended)
	tr.Lose = t.as(Lost)
	return tr
}

// as is a hook that hands events to the observer as kind k.
func (t Tap) as(k Kind) func(lock.Event) {
	return func(e lock.Event) { t.Observer(event(e, k)) }
}

// acquired reads how an acquire ended.
func acquired(e lock.Event) Event {
	switch err := e.Err; {
	case err == nil:
		return event(e, Acquired)
	case errors.Is(err, fault.ErrCrashed):
		return event(e, Crashed)
	case errors.Is(err, lock.ErrUnavailable):
		return event(e, Unavailable)
	}
	return event(e, Busy)
}

func event(e lock.Event, k Kind) Event {
	return Event{Time: e.Time, Kind: k, Variant: e.Variant, Key: e.Key, Tries: e.Tries, Wait: e.Wait, Lease: e.Lease, Err: e.Err}
}

// step asks the plan at a point: a pause sleeps there (the lock holds the
// lease's watchdog meanwhile), a crash ends the operation with ErrCrashed.
func (t Tap) step(ctx context.Context, e lock.Event) error {
	f, ok := t.Faults.Decide(e.Point)
	if !ok {
		return nil
	}
	if t.Observer != nil {
		t.Observer(Event{Time: time.Now(), Kind: FaultFired, Variant: e.Variant, Key: e.Key, Lease: e.Lease, Fault: &f})
	}
	if f.Action == fault.Crash {
		return fmt.Errorf("%w (%s)", fault.ErrCrashed, e.Point)
	}
	if !clock.Sleep(ctx, time.Duration(f.MS)*time.Millisecond) {
		return ctx.Err()
	}
	return nil
}
