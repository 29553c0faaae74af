package lock

import (
	"context"
	"fmt"
	"time"
)

// WaitingHere reports whether a waiter of this process waits for name
// (the speed layer's waiting room is open), for the tests of package
// lock_test.
func (l *Locker) WaitingHere(name string) bool { return l.wake.Waiting(l.prefix.lock + name) }

// VotesOpen waits until every node's votes' connection is open with
// nothing owed on it, or ctx is done: the connections open in the
// background when the lockers are made.
func (s *Client) VotesOpen(ctx context.Context) error {
	for _, n := range s.nodes {
		for !n.Pipe().Answering(time.Now()) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("votes' connection to %s not open: %w", n.Addr(), ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

// RaiseFenceScript is the source of the fence's write-back, for a test's
// proxy to recognise it on the wire.
var RaiseFenceScript = raiseFence.src

// Voting is how many nodes may vote now, as far as this process knows: a
// node younger than the TTL + drift, or whose fencing counters are not yet
// re-seeded for its incarnation, may not (restart awareness, internal/node).
func (s *Client) Voting() int {
	now, n := time.Now(), 0
	for _, nd := range s.nodes {
		if nd.Counts("", now) {
			n++
		}
	}
	return n
}

// ErrNodeLate marks a node answering, but not within the per-node timeout.
var ErrNodeLate = errNodeLate

// TTL is the lease time to live, for the tests of package lock_test.
func (s *Client) TTL() time.Duration { return s.cfg.ttl }

// TTL is the lease time to live this locker asks for.
func (l *Locker) TTL() time.Duration { return l.cfg.ttl }

// Fast reports whether the speed layer is on.
func (s *Client) Fast() bool { return s.cfg.fast.Load() }

// Watchdog reports whether new leases get a watchdog.
func (s *Client) Watchdog() bool { return s.cfg.watchdog.Load() }

// Extend renews the lease once, as its watchdog would.
func (l *Lease) Extend(ctx context.Context) error { return l.extend(ctx) }

// Lost is closed when the lease is known lost (Err).
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Name is the variant's name, for the tests' messages.
func (l *Locker) Name() string { return l.variant.Name }

// Traits are the traits lock declares of one of its own rungs.
type Traits struct{ Quorum, OwnerChecked, ValidityChecked, Fenced, SelfUndoing bool }

// LibraryTraits are the traits of the library's rungs by name, for the test
// that holds the ladder's entries for them to the same.
func LibraryTraits() map[string]Traits {
	out := map[string]Traits{}
	for _, r := range library {
		out[r.Name] = Traits{r.Quorum, r.OwnerChecked, r.ValidityChecked, r.Fenced, r.SelfUndoing}
	}
	return out
}
