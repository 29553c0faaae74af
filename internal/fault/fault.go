// Package fault is the fault plan a lock's holders run under: where in a
// lock's life a fault can be injected, what it does there, and a seeded
// plan that decides, point by point, whether one fires. The workshop and
// the load runners set plans; package lock asks the plan at each point.
// Faults only delay or abandon real operations; they never edit results.
package fault

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
)

// ErrCrashed is what an operation abandoned by a Crash at a point returns,
// exactly as a process dying there would leave it.
var ErrCrashed = errors.New("lock: holder crashed at an injected fault point")

// Point is a place in a lock's life where a fault can be injected. The points
// are the same for every variant; a variant whose step there is atomic has no
// gap, so nothing can happen in between. It is a plain string, as package
// lock's Trace.Step hook names the point it is at.
type Point = string

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

// Plan is a seeded fault plan shared by every variant, replaceable at run
// time. Its methods are safe for concurrent use.
type Plan struct {
	mu     sync.Mutex
	seed   uint64
	rng    *rand.Rand
	faults []Fault
	fired  map[Point]uint64
}

// NewPlan returns an empty plan: no fault ever fires.
func NewPlan() *Plan {
	return &Plan{rng: rand.New(rand.NewPCG(0, 0)), fired: map[Point]uint64{}}
}

// Set replaces the plan's faults. The same seed and faults fire the same
// sequence of decisions, so a workshop run can be repeated.
func (p *Plan) Set(seed uint64, faults []Fault) error {
	for _, f := range faults {
		if err := f.validate(); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seed = seed
	p.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p.faults = append([]Fault(nil), faults...)
	return nil
}

// Plan returns the seed and faults in force.
func (p *Plan) Plan() (uint64, []Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seed, append([]Fault(nil), p.faults...)
}

// Fired counts the faults fired so far, by point.
func (p *Plan) Fired() map[Point]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Point]uint64, len(p.fired))
	for pt, n := range p.fired {
		out[pt] = n
	}
	return out
}

// Decide draws whether a fault fires at pt, and counts it if one does.
func (p *Plan) Decide(pt Point) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if f.Point != pt || f.P <= 0 {
			continue
		}
		if f.P >= 1 || p.rng.Float64() < f.P {
			p.fired[pt]++
			return f, true
		}
	}
	return Fault{}, false
}
