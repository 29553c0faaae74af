package lock

import (
	"context"
	"fmt"
	"time"

	"flashsale/internal/clock"
	"flashsale/internal/fault"
	"flashsale/internal/locktap"
)

// faultPointsFor is the fault hook for one operation of lk on name; lease is nil
// before the lease exists. A fault is decided and acts with the lease's hold
// mutex held, as the watchdog extends: a pause freezes the watchdog too, and
// a crash is decided either after an extend or before one that never comes.
func (lk *Locker) faultPointsFor(name string, l *Lease) faultPoints {
	return func(ctx context.Context, p fault.Point) error {
		if l != nil {
			l.hold.Lock()
			defer l.hold.Unlock()
		}
		fl, ok := lk.cfg.faults.Decide(p)
		if !ok {
			return nil
		}
		lk.observe(locktap.Event{Kind: locktap.FaultFired, Variant: lk.rung.Name, Key: name, Fault: &fl}, l)
		if fl.Action == fault.Crash {
			if l != nil {
				l.crashed()
			}
			return fmt.Errorf("%w (%s)", fault.ErrCrashed, p)
		}
		if !clock.Sleep(ctx, time.Duration(fl.MS)*time.Millisecond) {
			return ctx.Err()
		}
		return nil
	}
}
