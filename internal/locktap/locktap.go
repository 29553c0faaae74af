// Package locktap is the application's way into package lock past what a
// team importing the lock sees: the fault plan the workshop injects and an
// observer of every acquire, release, lost lease and fired fault, for the
// metrics, the lease history and the workshop's timeline of holders.
//
// Package lock fills in the hooks when it is initialised; a program that
// does not import package lock has no lockers to tap, and the hooks panic.
package locktap

import (
	"time"

	"flashsale/internal/fault"
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

// Lease is what an observer may read of the lease an event concerns (a
// *lock.Lease): reading it never blocks, the event is sent with the
// lease's state unlocked.
type Lease interface {
	Key() string
	Variant() string
	Owner() string
	Token() (uint64, bool)
	Acquired() time.Time
	ValidUntil() time.Time
}

// Event is one thing that happened to a lock.
type Event struct {
	Time    time.Time
	Kind    Kind
	Variant string
	Key     string
	Tries   int           // acquire attempts (Acquired, Busy, Unavailable)
	Wait    time.Duration // time spent acquiring
	Lease   Lease         // the lease concerned, nil when there is none
	Fault   *fault.Fault  // the fault that fired (FaultFired)
	Err     error
}

// Tap is what the application attaches to the options of a set of
// lockers. A nil Faults is an empty plan of the lockers' own; a nil
// Observer hears nothing. The observer must not block.
type Tap struct {
	Faults   *fault.Plan
	Observer func(Event)
}

// The hooks package lock sets at its initialisation: the tap of a
// *lock.Options, and the fault plan of a *lock.Client.
var (
	tapOf  func(options any) *Tap
	planOf func(lockers any) *fault.Plan
)

// Register is called once by package lock, and by nothing else.
func Register(tap func(options any) *Tap, plan func(lockers any) *fault.Plan) {
	tapOf, planOf = tap, plan
}

// On is the tap of options, a *lock.Options, to be filled in before the
// lockers are made.
func On(options any) *Tap { return tapOf(options) }

// Plan is the fault plan every variant of lockers, a *lock.Client, shares.
func Plan(lockers any) *fault.Plan { return planOf(lockers) }

// Tapped is options (a lock.Options) with t attached.
func Tapped[O any](options O, t Tap) O {
	*tapOf(&options) = t
	return options
}
