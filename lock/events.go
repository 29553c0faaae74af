package lock

import (
	"errors"
	"time"

	"flashsale/internal/fault"
)

// EventKind says what happened to a lock.
type EventKind string

// Event kinds.
const (
	Acquired    EventKind = "acquired"
	Busy        EventKind = "busy"        // not acquired: held by another client
	Unavailable EventKind = "unavailable" // not acquired: too few nodes answered
	Crashed     EventKind = "crashed"     // abandoned by an injected crash
	Released    EventKind = "released"
	Lost        EventKind = "lost"     // the watchdog could not keep the lease
	Extended    EventKind = "extended" // the watchdog sent an extend (Time: when)
	FaultFired  EventKind = "fault"
)

// Event is one thing that happened to a lock, for metrics and the workshop's
// timeline of holders.
type Event struct {
	Time    time.Time
	Kind    EventKind
	Variant string
	Key     string
	Tries   int           // acquire attempts (Acquired, Busy, Unavailable)
	Wait    time.Duration // time spent acquiring
	Lease   *Lease        // the lease concerned, when there is one
	Fault   *fault.Fault  // the fault that fired (FaultFired)
	Err     error
}

func outcome(err error) EventKind {
	switch {
	case err == nil:
		return Acquired
	case errors.Is(err, fault.ErrCrashed):
		return Crashed
	case errors.Is(err, ErrUnavailable):
		return Unavailable
	default:
		return Busy
	}
}

func (l *Locker) observe(e Event) {
	if l.cfg.observer == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	l.cfg.observer(e)
}
