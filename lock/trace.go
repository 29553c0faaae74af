package lock

import (
	"context"
	"time"
)

// Trace holds the hooks a Client calls as its leases come and go, in the
// manner of net/http/httptrace: each hook is optional, runs on the
// goroutine of the operation it reports (the caller's, or a lease's
// watchdog), and must return quickly. A Client without a Trace calls none.
type Trace struct {
	// Acquire is called when an Acquire or TryAcquire ends: Event.Lease is
	// the lease granted, or Event.Err says why there is none.
	Acquire func(Event)
	// Release is called when a release ends, with its error.
	Release func(Event)
	// Extend is called when a lease's watchdog has extended it.
	Extend func(Event)
	// Lose is called when a lease's watchdog could not keep it: its Lost
	// channel has just closed.
	Lose func(Event)
	// Step is called at every point between two steps of an operation, and
	// inside a holder's critical section (Lease.Checkpoint); Event.Point
	// names the point: "after-acquire-step1" (after a variant's first
	// acquire command, and when a waiter is handed a lease),
	// "between-release-steps" (between a two-command release's steps),
	// "after-lease-check" (after CheckBeforeWrite, before the holder's
	// write), or the name the caller gave Lease.Checkpoint. It runs under the lease's hold, so a pause here
	// stalls the lease's watchdog too, as a stalled process would. An
	// error ends the operation there, as a crash would: the operation
	// returns that error (wrapped), and a lease it concerns is neither
	// released nor extended afterwards.
	Step func(ctx context.Context, e Event) error
}

// Event is what a Trace hook is told.
type Event struct {
	Time    time.Time     // when the operation began (Acquire: when it ended)
	Variant string        // the Locker's variant
	Key     string        // the lock's name
	Point   string        // the step's point (Step only)
	Tries   int           // acquire attempts made (Acquire only)
	Wait    time.Duration // time spent acquiring (Acquire only)
	Lease   *Lease        // the lease concerned; nil when there is none
	Err     error         // why the operation failed; nil when it did not
}
