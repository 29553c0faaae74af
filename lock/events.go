package lock

import (
	"errors"
	"time"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
)

// The application's tap reaches a set's options and its fault plan through
// these hooks, so neither is part of what an importer of the lock sees.
func init() {
	locktap.Register(
		func(options any) *locktap.Tap { return &options.(*Options).tap },
		func(lockers any) *fault.Plan { return lockers.(*Lockers).cfg.faults },
	)
}

// outcome is the kind of event an acquire that returned err reports.
func outcome(err error) locktap.Kind {
	switch {
	case err == nil:
		return locktap.Acquired
	case errors.Is(err, fault.ErrCrashed):
		return locktap.Crashed
	case errors.Is(err, ErrUnavailable):
		return locktap.Unavailable
	default:
		return locktap.Busy
	}
}

// observe sends e, about lease (nil: about no lease), to the tap's
// observer, if there is one.
func (l *Locker) observe(e locktap.Event, lease *Lease) {
	if l.cfg.observer == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if lease != nil {
		e.Lease = lease
	}
	l.cfg.observer(e)
}
