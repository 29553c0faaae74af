package lock

import (
	"context"
	"time"
)

// This file is part of the speed layer (fast.go): a release that hands the
// lease straight to the next waiter of the same process, and the order in
// which the waiters of a process take the key.

// handingOver is a variant whose lease can pass from its holder straight to
// the next waiter of the same process: one atomic step per node that checks
// the holder's value and writes the waiter's (passLease; each rung's half
// is in fast_pass.go), in place of a release and the acquire that would
// follow it. That is one round trip to the nodes where the release and the
// acquire take two, one after the other, and the next holder is in as soon
// as it returns.
//
// Why it is as safe as the release and acquire it replaces: on each node
// the key goes from the holder's value to the waiter's in one step, so
// nobody else can hold it in between; a node where the key is not the
// holder's any more passes nothing. The new lease counts its validity from
// the moment the hand-over was sent, in this process, exactly as an acquire
// counts from the moment its SETs were sent; Redlock's needs a quorum of
// nodes that passed it, as an acquire needs a quorum that granted it; and a
// fenced lease draws its token in the same step, so tokens keep growing.
// Only owner-checked variants hand over: a broken release has nothing to
// check the holder's value with.
type handingOver interface {
	handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error)
}

// noGap is the fault hook of a hand-over, which runs in the releasing
// holder: the next holder meets the after-acquire fault point itself, once
// the lease reaches it (Locker.receive).
func noGap(context.Context, Point) error { return nil }

// handOver passes the lease to the waiter whose turn it is in kw, and reports
// whether it did. A lease that did not pass is still the releaser's to
// give back the usual way.
func (l *Lease) handOver(ctx context.Context, h handingOver, kw *keyWait) bool {
	lk := l.locker
	value := newValue()
	start := time.Now()
	g, err := h.handOver(ctx, l.k, l.value, value, lk.cfg.ttl)
	if err != nil {
		// Not passed, as far as we know; but a script whose answer came
		// late may have passed it to nobody: undo that too, then wake the
		// waiter whose turn it was. Nothing else will: its release, if it
		// is still to come, finds the key not the releaser's, and the
		// waiter may be dozing until the releaser's lease runs out.
		lk.abandon(ctx, l.k, value, err, func() { lk.wake.freed(l.k.lock) })
		return false
	}
	next := lk.newLease(l.name, l.k, value, g, start)
	lk.wake.hold(l.k.lock, next)
	if !lk.wake.give(kw, next) {
		// Every waiter here left while the lease was on its way.
		next.releaseLater(ctx)
	}
	return true
}

// receive is the waiter's side of a hand-over: the lease is its own now,
// and the after-acquire fault point is where it would have been.
func (l *Locker) receive(ctx context.Context, lease *Lease, tries int) (*Lease, int, error) {
	if err := l.cfg.faults.gapFor(l, lease.name, lease)(ctx, AfterAcquireStep1); err != nil {
		return nil, tries, err
	}
	return lease, tries, nil
}

// maxStreak bounds how many grants in a row one process passes among its own
// waiters before the next process in the line gets the key. A hand-over here
// costs a third of a hand-off to another process (one round trip against a
// release, a wake-up message and an acquire), so a longer streak is faster;
// eight serves a process's waiters about once a turn while the other
// processes wait at most eight short sections longer for theirs.
const maxStreak = 8

// nextHere is the waiting room of the waiter here that the key, about to be
// released by a lease of lk, a variant whose waiters stand in line, should go
// to next; nil when nobody here waits, or when this process has passed the
// key among its own waiters maxStreak times in a row and the line's head is
// next. handOver says whether the lease may pass to that waiter directly:
// not to a waiter of another variant.
func (w *waker) nextHere(key string, lk *Locker) (kw *keyWait, handOver bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw = w.keys[key]
	if kw == nil {
		return nil, false
	}
	if kw.streak >= maxStreak {
		kw.streak = 0
		return nil, false
	}
	kw.streak++
	return kw, !kw.mixed && kw.by == lk
}

// give puts a lease handed over by the holder here in kw for the waiter
// whose turn it is, and reports whether it could: not once the room closed.
func (w *waker) give(kw *keyWait, lease *Lease) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if kw.refs == 0 {
		return false
	}
	select {
	case kw.given <- lease:
	default: // cannot happen: only the lease's holder hands it over
		return false
	}
	kw.wake()
	return true
}

// received takes a lease handed over to the room, if one is there, for the
// waiter whose turn it is. A lease of another variant on the same key (a
// room serves every variant) is not this waiter's: it is given back.
func (l *Locker) received(kw *keyWait) (*Lease, bool) {
	select {
	case lease := <-kw.given:
		if lease.locker != l {
			lease.releaseLater(l.wake.ctx)
			return nil, false
		}
		l.wake.markTaken(kw)
		return lease, true
	default:
		return nil, false
	}
}

// releaseThen is redlock's release (redlock.go) as the speed layer sends
// it: the same compare-and-delete on every node, with queued (if set)
// called as soon as every delete is on its node's pipelined connection. An
// acquire sent from this process after that reaches each node behind our
// delete, so the next waiter here may go at once.
//
// Inside its validity a lease is held by a quorum (that is what the
// validity means), so one node that deleted our value confirms the release;
// past its validity only a quorum of deletes does. The other deletes are
// sent all the same.
func (r *redlock) releaseThen(ctx context.Context, k keys, value string, valid bool, queued func()) error {
	u, need := r.majority(), r.quorum()
	if valid {
		u, need = enough{yes: 1}, 1
	}
	// send has queued a command on every node's connection when it returns
	// (none where ctx was done already: the next waiter's try then finds
	// the key still held, a try lost, never a second holder).
	replies := r.send(ctx, compareAndDelete.call([]string{k.lock}, value))
	if queued != nil {
		queued()
	}
	if qe := r.tally("release", k, r.gather(ctx, replies, u)); len(qe.Granted) < need {
		return qe
	}
	return nil
}

// orderedRelease is a variant whose commands reach every node in the order
// this process sent them (redlock, over the pipelined connections): its
// release can let the next waiter go as soon as the deletes are queued.
type orderedRelease interface {
	releaseThen(ctx context.Context, k keys, value string, valid bool, queued func()) error
}
