package lock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"flashsale/internal/clock"
)

// Point is a place in a lock's life where a fault can be injected. The points
// are the same for every variant; a variant whose step there is atomic has no
// gap, so nothing can happen in between.
type Point string

// Fault points.
const (
	// AfterAcquireStep1 is right after the first acquire command (SETNX, or
	// the only one for an atomic acquire).
	AfterAcquireStep1 Point = "after-acquire-step1"
	// BetweenReleaseSteps is between a two-step release's check and delete.
	BetweenReleaseSteps Point = "between-release-steps"
	// InCriticalSection is inside the holder's work, between read and write.
	InCriticalSection Point = "in-critical-section"
	// AfterLeaseCheck is after the holder's last look at its lease
	// (Lease.CheckBeforeWrite) and before its write: the window a lease
	// check cannot close. Variants that do not check pass it all the same.
	AfterLeaseCheck Point = "after-lease-check"
)

// Points lists every fault point.
func Points() []Point {
	return []Point{AfterAcquireStep1, BetweenReleaseSteps, InCriticalSection, AfterLeaseCheck}
}

// Action is what a fault does when it fires.
type Action string

// Fault actions.
const (
	// Crash abandons the operation there, as if the process died: nothing
	// after the point runs and the lease is never released.
	Crash Action = "crash"
	// Pause freezes the holder (and its watchdog) for the fault's duration.
	Pause Action = "pause"
)

// Fault fires Action at Point with probability P, pausing for MS milliseconds.
type Fault struct {
	Point  Point   `json:"point"`
	Action Action  `json:"action"`
	P      float64 `json:"p"`
	MS     int     `json:"ms,omitempty"`
}

func (f Fault) validate() error {
	if !slices.Contains(Points(), f.Point) {
		return fmt.Errorf("unknown fault point %q (want one of %v)", f.Point, Points())
	}
	switch f.Action {
	case Crash:
	case Pause:
		if f.MS <= 0 || f.MS > 60_000 {
			return fmt.Errorf("pause at %s needs ms between 1 and 60000, got %d", f.Point, f.MS)
		}
	default:
		return fmt.Errorf("unknown fault action %q (want %s or %s)", f.Action, Crash, Pause)
	}
	if f.P < 0 || f.P > 1 {
		return fmt.Errorf("fault probability p must be between 0 and 1, got %v", f.P)
	}
	return nil
}

// Faults is a seeded fault plan shared by every variant, replaceable at run
// time. Faults only delay or abandon real operations; they never edit results.
type Faults struct {
	mu    sync.Mutex
	seed  uint64
	rng   *rand.Rand
	plan  []Fault
	fired map[Point]uint64
}

// NewFaults returns an empty plan: no fault ever fires.
func NewFaults() *Faults {
	return &Faults{rng: rand.New(rand.NewPCG(0, 0)), fired: map[Point]uint64{}}
}

// Set replaces the plan. The same seed and plan fire the same sequence of
// decisions, so a workshop run can be repeated.
func (f *Faults) Set(seed uint64, plan []Fault) error {
	for _, fl := range plan {
		if err := fl.validate(); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seed = seed
	f.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	f.plan = append([]Fault(nil), plan...)
	return nil
}

// Plan returns the seed and faults in force.
func (f *Faults) Plan() (uint64, []Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seed, append([]Fault(nil), f.plan...)
}

// Fired counts the faults fired so far, by point.
func (f *Faults) Fired() map[Point]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Point]uint64, len(f.fired))
	for p, n := range f.fired {
		out[p] = n
	}
	return out
}

// decide draws whether a fault fires at p.
func (f *Faults) decide(p Point) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.plan {
		if fl.Point != p || fl.P <= 0 {
			continue
		}
		if fl.P >= 1 || f.rng.Float64() < fl.P {
			f.fired[p]++
			return fl, true
		}
	}
	return Fault{}, false
}

// gapFor is the fault hook for one operation of lk on name; lease is nil
// before the lease exists. A fault is decided and acts with the lease's hold
// mutex held, as the watchdog extends: a pause freezes the watchdog too, and
// a crash is decided either after an extend or before one that never comes.
func (f *Faults) gapFor(lk *Locker, name string, l *Lease) gap {
	return func(ctx context.Context, p Point) error {
		if l != nil {
			l.hold.Lock()
			defer l.hold.Unlock()
		}
		fl, ok := f.decide(p)
		if !ok {
			return nil
		}
		lk.observe(Event{Kind: FaultFired, Variant: lk.rung.Name, Key: name, Lease: l, Fault: &fl})
		if fl.Action == Crash {
			if l != nil {
				l.crashed()
			}
			return fmt.Errorf("%w (%s)", ErrCrashed, p)
		}
		if !clock.Sleep(ctx, time.Duration(fl.MS)*time.Millisecond) {
			return ctx.Err()
		}
		return nil
	}
}
