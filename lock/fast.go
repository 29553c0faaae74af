package lock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// The speed layer.
//
// The ladder (the rung files, retry.go, and this package's machinery) is
// the lock as taught: a waiter tries, and when the lock is busy it retries
// after a random delay; a holder gives the lock back with its rung's own
// release. That is correct, and slow where a flash sale needs speed: on one
// hot key every release is followed by a storm of tries from every waiting
// process, Redlock's votes split between them, and each failed try costs
// CPU the holder needs. The speed layer (this file and fast_*.go) sits
// beside the ladder and, while it is on (WithFast, Lockers.SetFast), adds:
//
//   - keyspace wake-ups (fast_wake.go): a waiter sleeps until the key is
//     deleted or expires, not a random delay; waiters of one process take
//     turns, one try per release;
//   - a waiting line per hot key across processes (fast_line.go): a release
//     wakes the process at the head of the line, not every process, and
//     puts the releasing process behind it, so one that comes straight
//     back for the key (a batch's next lease) waits its turn;
//   - a hand-over within a process (fast_handover.go, fast_pass.go): a
//     release with a waiter of the same process passes the lease to it in
//     one atomic step in place of the release and the acquire that would
//     follow;
//   - an ordered release for Redlock (fast_handover.go): the next waiter of
//     this process tries as soon as the deletes are queued on each node's
//     connection, which carries one process's commands in order;
//   - an early busy answer (Locker.ExpectedWait): a caller can be told busy
//     at once when the waiters ahead of it will use up its wait.
//
// What the switch changes, and all it changes. On: Acquire waits with
// acquireFast, Release is releaseFast, ExpectedWait answers, the waker
// listens (a pub/sub connection and a goroutine per node, this process's
// line channel subscribed), and a node's keyspace notifications are turned
// on (notify-keyspace-events gains K, g and x) by the first connection made
// to each of its incarnations while the layer is on. Off: Acquire is retry.go's loop, Release is the
// rung's own release, ExpectedWait is zero, the waker does not listen (its
// connections close when switched off at run time) and no notification
// setting is made; the waiting rooms, lines and hand-over scripts are never
// used. What stays the same either way: every rung's acquire, release and
// extend, the watchdog, the fault points, restart awareness, and the
// transport beneath Redlock: its votes always travel on one pipelined
// connection per node (internal/node). That transport is not a speed feature one
// could do without: sending each vote on a pooled go-redis connection from
// a goroutine of its own, tried as the plain transport, missed the per-node
// timeout under a flash sale's hundreds of waiters, and every vote then
// failed as unavailable. It sends the same commands, so what is taught is
// unchanged. Switched off at run time, a notification setting already made
// stays on the node; nothing listens to it.
//
// What it may change: who tries next and when, a release and the next
// acquire fused into one hand-over, and when a caller gives up early. What
// it never does: grant. Every lease is
// the rung's own acquire, or the rung's declared hand-over, which checks
// the holder's value and writes the next holder's in one atomic step on
// each node, counts Redlock's validity and quorum exactly as an acquire
// does, and draws a fencing token as an acquire does. So a lost, stale or
// doubled wake-up costs time, never a second holder, and every rung breaks
// or holds under the same faults with the speed layer on or off: the
// broken rungs keep their own releases, and none of them hands over.
//
// A waiter must not sleep while the key is free: a waiter in a key's line
// looks at the key at least every lineSlack, whatever the line holds (a
// stale or dead place ahead of it, or a line that expired), so it notices
// a free key within lineSlack plus one round trip to the first node.

// lineSlack bounds how long a waiter in a key's line sleeps between looks
// at the key (see above).
const lineSlack = 50 * time.Millisecond

// lined reports whether the variant's waiters stand in a key's line across
// processes (fast_line.go): the owner-checked variants, whose keys only a
// release by the holder or the TTL can free, so a release that wakes the
// line's head wakes the one waiter that should try.
func (l *Locker) lined() bool {
	_, ok := l.v.(ownerChecked)
	return ok
}

// acquireFast waits its turn among this process's waiters, then tries;
// after a busy answer it dozes until the key is likely free. Busy and
// unavailable answers are retried until ctx is done; a crash is not.
func (l *Locker) acquireFast(ctx context.Context, name string) (*Lease, int, error) {
	key := l.keysFor(name).lock
	tries := 0
	// last is what this waiter's tries found, noted in the room too: a
	// waiter whose wait runs out says what the room's last try found
	// (waker.told), busy or the nodes down, had it a try of its own or not.
	var last error
	if !l.wake.waiting(key) {
		// Nobody here waits: one try before opening a waiting room.
		lease, err := l.try(ctx, name)
		tries++
		switch {
		case err == nil:
			return l.heldHere(lease), tries, nil
		case !retryable(err):
			return nil, tries, err
		case ctx.Err() != nil:
			return nil, tries, errors.Join(telling(err, ErrNotAcquired), context.Cause(ctx))
		}
		last = noted(err, ErrNotAcquired)
	}
	// Waiters in several processes must not all try at once: Redlock's votes
	// would split, and every failed try costs CPU the holder needs. The
	// owner-checked variants' waiters stand in the key's line.
	kw := l.wake.join(key, l, l.lined())
	defer l.wake.leave(key, kw)
	l.wake.found(kw, last)

	select {
	case kw.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, tries, errors.Join(l.wake.told(kw, last), context.Cause(ctx))
	}
	defer func() { <-kw.turn }()

	wait := l.wake.lastTaken(kw)
	if wait == nil && kw.line {
		// A room that does not hear the key's events has nothing to gain
		// from a second try now: it joins the line first.
		wait = l.wake.current(kw)
	}
	backoff := l.cfg.backoffMin
	for {
		if lease, ok := l.received(kw); ok {
			return l.receive(ctx, lease, tries+1)
		}
		if wait != nil && !closed(wait) {
			err := l.doze(ctx, key, kw, wait, &backoff)
			if lease, ok := l.received(kw); ok { // a hand-over wakes the room too
				return l.receive(ctx, lease, tries+1)
			}
			if err != nil {
				return nil, tries, errors.Join(l.wake.told(kw, last), context.Cause(ctx))
			}
		}
		freed := l.wake.current(kw) // before trying, so a release during the try is not missed
		lease, err := l.try(ctx, name)
		tries++
		switch {
		case err == nil:
			l.wake.markTaken(kw)
			return l.heldHere(lease), tries, nil
		case !retryable(err):
			return nil, tries, err
		case ctx.Err() != nil:
			return nil, tries, errors.Join(telling(err, l.wake.told(kw, last)), context.Cause(ctx))
		}
		last, wait = noted(err, l.wake.told(kw, last)), freed
		l.wake.found(kw, last)
	}
}

// doze sleeps until the key is likely free: wait closes (a release here, a
// keyspace event, the line's wake-up), a waiter in line finds the key gone
// when it looks (every lineSlack), or the jittered backoff runs out for a
// waiter that is not in line. It returns ctx's error if ctx ends first.
func (l *Locker) doze(ctx context.Context, key string, kw *keyWait, wait <-chan struct{}, backoff *time.Duration) error {
	look := false // the first round joins the line; later ones look again
	for {
		// A lease held here ends with a release that wakes us directly, or
		// at its validity: no try before then can succeed.
		d := *backoff/2 + rand.N(*backoff/2+1)
		place := int64(noLine)
		if kw.line {
			switch place = l.wake.queue(ctx, key, kw, look); {
			case place > 0:
				d = min(lineSlack, l.cfg.backoffMax)
			case place == 0:
				return nil // the key is gone already: no event will come for it
			}
		}
		if until, ok := l.wake.heldUntil(key); ok {
			d = max(time.Until(until), d)
		}
		t := time.NewTimer(d)
		select {
		case <-wait:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if place <= 0 {
			*backoff = min(2**backoff, l.cfg.backoffMax)
			return nil
		}
		look = true
	}
}

// heldHere notes a lease of an owner-checked variant that this process now
// holds: a delete event for its key is then the echo of an older release.
func (l *Locker) heldHere(lease *Lease) *Lease {
	if _, ok := l.v.(ownerChecked); ok {
		l.wake.hold(lease.k.lock, lease)
	}
	return lease
}

// releaseFast gives the lease back and lets the next waiter in: one here,
// or, for a variant whose waiters stand in line, the head of the key's
// line.
func (l *Lease) releaseFast(ctx context.Context) error {
	lk, key := l.locker, l.k.lock
	lk.wake.unhold(key, l)
	if !lk.lined() {
		// Wake this process's next waiter now rather than after the
		// keyspace event's round trip; other processes still get the event.
		err := lk.v.release(ctx, lk.cfg.faults.gapFor(lk, l.name, l), l.k, l.value)
		if err == nil {
			lk.wake.deleted(key)
		}
		return err
	}
	valid := time.Now().Before(l.ValidUntil())
	next := func() { lk.wake.toLine(key) }
	if kw, direct := lk.wake.nextHere(key, lk); kw != nil {
		// A waiter here is next: the lease passes to it in one step
		// (fast_handover.go), else it tries once the release is on its way.
		if h, ok := lk.v.(handingOver); ok && direct && valid && l.handOver(ctx, h, kw) {
			return nil
		}
		next = func() { lk.wake.freed(key) }
	}
	if o, ok := lk.v.(orderedRelease); ok {
		// Redlock: its commands reach each node in order, so the next
		// waiter may go as soon as the release is on its way: its acquire
		// cannot overtake it.
		return o.releaseThen(ctx, l.k, l.value, valid, next)
	}
	err := lk.v.release(ctx, lk.cfg.faults.gapFor(lk, l.name, l), l.k, l.value)
	if err == nil {
		next()
	}
	return err
}

// join enters a waiter of by, whose waiters stand in the key's line if lined,
// in the key's waiting room, opening it if nobody here waits yet.
func (w *waker) join(key string, by *Locker, lined bool) *keyWait {
	w.mu.Lock()
	kw := w.keys[key]
	opened := kw == nil
	if opened {
		kw = &keyWait{turn: make(chan struct{}, 1), freed: make(chan struct{}), given: make(chan *Lease, 1),
			line: lined && w.line != nil, by: by}
		if kw.line && w.hasPlace(key) {
			kw.queued = true // a release here took this place for us
		}
		delete(w.placed, key)
		w.keys[key] = kw
	}
	kw.mixed = kw.mixed || kw.by != by
	kw.refs++
	w.mu.Unlock()
	if opened {
		w.sync(key)
	}
	return kw
}

func (w *waker) leave(key string, kw *keyWait) {
	w.mu.Lock()
	kw.refs--
	closed := kw.refs == 0
	var orphan *Lease
	if closed {
		delete(w.keys, key)
		select {
		case orphan = <-kw.given:
		default:
		}
	}
	w.mu.Unlock()
	if orphan != nil {
		// Handed over as the last waiter here gave up: nobody will use it.
		orphan.releaseLater(w.ctx)
	}
	if closed {
		// Off the caller's path: a node that does not answer would hold a
		// lease back from its holder while its validity runs.
		w.resync(key)
	}
}

// markTaken notes a grant to a waiter of the room: the next waiter waits for
// the key to be freed, and the room's pace is measured.
func (w *waker) markTaken(kw *keyWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw.taken = kw.freed
	now := time.Now()
	if !kw.lastGrant.IsZero() {
		gap := now.Sub(kw.lastGrant)
		if kw.every == 0 {
			kw.every = gap
		} else {
			kw.every += (gap - kw.every) / 8
		}
	}
	kw.lastGrant = now
}

// expectedWait is how long a waiter that joins the key's room now can expect
// to wait: the waiters ahead of it times the room's pace. Zero when nobody
// here waits, or before the room has seen two grants.
func (w *waker) expectedWait(key string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw := w.keys[key]
	if kw == nil {
		return 0
	}
	return time.Duration(kw.refs) * kw.every
}

// closed reports whether ch is closed already.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
