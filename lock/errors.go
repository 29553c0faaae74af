package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Errors a caller can branch on with errors.Is.
var (
	// ErrNotAcquired means the lock is held by someone else (busy).
	ErrNotAcquired = errors.New("lock: not acquired, held by another client")
	// ErrUnavailable means too few Redis nodes answered to decide (down, not busy).
	ErrUnavailable = errors.New("lock: unavailable, too few Redis nodes reachable")
	// ErrNotHeld means a release or extend found the lease no longer ours:
	// it expired, or another client holds the key now.
	ErrNotHeld = errors.New("lock: lease not held")
	// ErrLockLost is reported by the watchdog when it could not keep a lease alive.
	ErrLockLost = errors.New("lock: lease lost while held")
	// ErrUnknownVariant is returned for a variant name that is not on the ladder.
	ErrUnknownVariant = errors.New("lock: unknown variant")
)

// errNodeLate marks a node that was answering but whose vote was not read
// in time: it is up, so the vote says busy, never unavailable.
var errNodeLate = errors.New("lock: node answering, but not within the per-node timeout")

// QuorumError says how every Redis node answered a Redlock operation that did
// not reach a quorum. It matches ErrUnavailable when too many nodes failed
// (or are still restarting) for any quorum to be possible, else
// ErrNotAcquired for an acquire and ErrNotHeld for a release or extend.
type QuorumError struct {
	Op         string           // "acquire", "release" or "extend"
	Key        string           // the lock key
	Quorum     int              // votes needed
	Nodes      int              // nodes in all
	Granted    []string         // nodes that said yes
	Refused    []string         // nodes that answered no (held by another)
	Failed     map[string]error // nodes that did not answer in time, and why (errNodeLate: up, but late)
	Restarting []string         // nodes restart awareness does not count yet: restarted, flushed, not met yet
	Unheard    []string         // nodes whose answer was not needed to decide
	Late       bool             // a quorum said yes, but the validity was used up
}

// unavailable: so many nodes are down (failed, not merely late) or still
// restarting that no quorum is possible.
func (e *QuorumError) unavailable() bool {
	down := len(e.Restarting)
	for _, err := range e.Failed {
		if !errors.Is(err, errNodeLate) {
			down++
		}
	}
	return down > e.Nodes-e.Quorum
}

// Error lists the nodes by answer.
func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d of %d nodes granted, a quorum of %d needed", e.Op, e.Key, len(e.Granted), e.Nodes, e.Quorum)
	if e.Late {
		b.WriteString(", but too late: validity used up")
	}
	if len(e.Refused) > 0 {
		fmt.Fprintf(&b, "; refused by %s", strings.Join(e.Refused, ", "))
	}
	if len(e.Unheard) > 0 {
		fmt.Fprintf(&b, "; not waited for: %s", strings.Join(e.Unheard, ", "))
	}
	if len(e.Restarting) > 0 {
		fmt.Fprintf(&b, "; not counted yet by restart awareness (sitting out a restart or a loss of data, re-seeding, or not met yet): %s", strings.Join(e.Restarting, ", "))
	}
	if len(e.Failed) > 0 {
		addrs := make([]string, 0, len(e.Failed))
		for a := range e.Failed {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		for i, a := range addrs {
			addrs[i] = fmt.Sprintf("%s (%v)", a, e.Failed[a])
		}
		fmt.Fprintf(&b, "; failed: %s", strings.Join(addrs, ", "))
	}
	return b.String()
}

// Unwrap makes errors.Is see ErrUnavailable, ErrNotAcquired or ErrNotHeld,
// and errNodeLate when a node was late: its command may have run.
func (e *QuorumError) Unwrap() []error {
	var out error
	switch {
	case e.unavailable():
		out = ErrUnavailable
	case e.Op == "acquire":
		out = ErrNotAcquired
	default:
		out = ErrNotHeld
	}
	for _, err := range e.Failed {
		if errors.Is(err, errNodeLate) {
			return []error{out, errNodeLate}
		}
	}
	return []error{out}
}

// down marks a single-node rung's Redis error as its node unreachable.
func down(rdb *redis.Client, err error) error {
	return fmt.Errorf("%w: node %s: %w", ErrUnavailable, rdb.Options().Addr, err)
}

// retryable errors are worth waiting out: busy, or nodes not answering.
func retryable(err error) bool {
	return errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrUnavailable)
}

// finalError is what a wait that ended with the caller's context reports of
// its last try, err: its own error if a node really failed, else what the
// tries before it found; a try cut short by the deadline says nothing.
func finalError(err, before error) error {
	if !errors.Is(err, ErrUnavailable) {
		return before
	}
	if qe, ok := errors.AsType[*QuorumError](err); ok {
		for _, nodeErr := range qe.Failed {
			if !timedOut(nodeErr) {
				return err
			}
		}
		return before
	}
	if timedOut(err) {
		return before
	}
	return err
}

// errorToKeep is what a waiter keeps of a failed try: the try's error,
// unless it is a single node's read cut short by the caller's deadline
// (which can arrive a moment before ctx says it is done), then what it kept
// before.
func errorToKeep(err, before error) error {
	if _, ofQuorum := errors.AsType[*QuorumError](err); !ofQuorum && errors.Is(err, ErrUnavailable) && timedOut(err) {
		return before
	}
	return err
}

// timedOut reports an error that only says time ran out.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
