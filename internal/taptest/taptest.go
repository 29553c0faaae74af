// Package taptest gives tests a fault plan and an observer on the lockers
// they make, as the application hangs its own on them (locktap.Tap).
package taptest

import (
	"sync"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
	"flashsale/lock"
)

// observers are the observers tests asked for (Observed), by the trace
// that stands for them until Tap makes the real one.
var observers sync.Map // *lock.Trace → func(locktap.Event)

// Observed is o with f observing its lockers' events, the fault plan's
// included, once Tap has made its trace.
func Observed(o lock.Options, f func(locktap.Event)) lock.Options {
	o.Trace = &lock.Trace{}
	observers.Store(o.Trace, f)
	return o
}

// Tap is o traced by a new fault plan, which it returns for the test to
// set, and by the observer Observed gave o, if any.
func Tap(o lock.Options) (lock.Options, *fault.Plan) {
	tap := locktap.Tap{Faults: fault.NewPlan()}
	if f, ok := observers.LoadAndDelete(o.Trace); ok {
		tap.Observer = f.(func(locktap.Event))
	}
	return locktap.Tapped(o, tap), tap.Faults
}
