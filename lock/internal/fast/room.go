package fast

import "time"

// Room is the waiting room of one lock key in this process.
type Room[L comparable] struct {
	refs int
	// turn lets one waiter at a time try: blocked senders on a channel are
	// served in arrival order, which makes the wait fair and keeps a hot key
	// to one attempt per release from this process.
	turn chan struct{}
	// freed is closed, and replaced, whenever the key is deleted or expires.
	freed chan struct{}
	// line: the waiters stand in the key's line across processes
	//; a delete event does not wake them, the line does, and
	// the room does not even listen for the key's events unless head or
	// unlined says it must.
	line bool
	// unlined: the line could not be asked (its node does not answer), so
	// the waiters fall back to the key's events and the backoff.
	unlined bool
	// streak counts the grants passed from waiter to waiter here since the
	// line last woke this process: after maxStreak the lock goes to the
	// line's head, so other processes get their turn.
	streak int
	// queued: this process stands in the key's line; it joins once, and
	// again only after the line woke it.
	queued bool
	// head: this process joined an empty line, so the holder may not know
	// anyone waits (see ToLine): it listens for the key's delete event.
	head bool
	// taken is freed as it was when a waiter of this process last acquired:
	// the next waiter knows the lock is held and waits for it to be freed
	// instead of trying straight away.
	taken chan struct{}
	// by is the locker of the room's waiters, unless mixed: waiters of
	// several variants wait for the key, and no lease is handed over.
	by    any
	mixed bool
	// lastGrant is when a waiter here last got the lock, and every the
	// moving mean of the time between such grants: how fast this room's
	// waiters are served, whatever share of the key other processes get.
	lastGrant time.Time
	every     time.Duration
	// seen is what the room's last try found (busy, or the nodes down),
	// for a waiter whose wait runs out before a try of its own.
	seen error
	// handed holds a lease handed over by the holder here (Give) until the
	// waiter whose turn it is takes it; a room that closes with one in it
	// gives it back.
	handed chan handed[L]
}

// handed is a lease handed over to a room, and the locker it is of.
type handed[L comparable] struct {
	lease L
	by    any
}

// listens reports whether the room needs the key's delete and expiry
// events: a room whose waiters are not in a line, the head of a line the
// holder may not know about, and a room whose line cannot be asked. The
// others are woken by the line; hearing every release of a hot key in every
// waiting process would cost each of them a wake-up per grant, CPU the
// holder needs.
func (r *Room[L]) listens() bool { return !r.line || r.head || r.unlined }

// wake lets the room's next waiter try: it closes freed and puts a new one
// in its place. Called with the waker's mu held.
func (r *Room[L]) wake() {
	close(r.freed)
	r.freed = make(chan struct{})
}

// Join enters a waiter of by, whose waiters stand in the key's line if
// lined, in the key's waiting room, opening it if nobody here waits yet.
// Leave takes it out again.
func (w *Waker[L]) Join(key string, by any, lined bool) *Room[L] {
	w.mu.Lock()
	r := w.keys[key]
	opened := r == nil
	if opened {
		r = &Room[L]{turn: make(chan struct{}, 1), freed: make(chan struct{}), handed: make(chan handed[L], 1),
			line: lined && w.line != nil, by: by}
		if r.line && w.hasPlace(key) {
			r.queued = true // a release here took this place for us
		}
		delete(w.placed, key)
		w.keys[key] = r
	}
	r.mixed = r.mixed || r.by != by
	r.refs++
	w.mu.Unlock()
	if opened {
		w.sync(key)
	}
	return r
}

// Leave takes a waiter out of the key's room, and closes the room when it
// was the last one there.
func (w *Waker[L]) Leave(key string, r *Room[L]) {
	w.mu.Lock()
	r.refs--
	closed := r.refs == 0
	var orphan *handed[L]
	if closed {
		delete(w.keys, key)
		select {
		case h := <-r.handed:
			orphan = &h
		default:
		}
	}
	w.mu.Unlock()
	if orphan != nil {
		// Handed over as the last waiter here gave up: nobody will use it.
		w.giveBack(w.ctx, orphan.lease)
	}
	if closed {
		// Off the caller's path: a node that does not answer would hold a
		// lease back from its holder while its validity runs.
		w.resync(key)
	}
}

// current is the channel the next deletion or expiry of the key will close.
func (w *Waker[L]) current(r *Room[L]) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return r.freed
}

func (w *Waker[L]) lastTaken(r *Room[L]) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return r.taken
}

// found notes what a try of the room's found; nil notes nothing.
func (w *Waker[L]) found(r *Room[L], err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r.seen = err
}

// told is what a waiter of the room whose wait runs out is told: what the
// room's last try found (its own tries are noted there too), else what its
// own try found before it joined (own), else nil, which the Locker tells as
// busy. With no quorum possible every try finds the nodes down, and a
// waiter that had no turn since must say so too, not busy.
func (w *Waker[L]) told(r *Room[L], own error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.seen != nil {
		return r.seen
	}
	return own
}

// markTaken notes a grant to a waiter of the room: the next waiter waits for
// the key to be freed, and the room's pace is measured.
func (w *Waker[L]) markTaken(r *Room[L]) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r.taken = r.freed
	now := time.Now()
	if !r.lastGrant.IsZero() {
		gap := now.Sub(r.lastGrant)
		if r.every == 0 {
			r.every = gap
		} else {
			r.every += (gap - r.every) / 8
		}
	}
	r.lastGrant = now
}

// ExpectedWait is how long a waiter that joins the key's room now can expect
// to wait: the waiters ahead of it times the room's pace. Zero when nobody
// here waits, or before the room has seen two grants.
func (w *Waker[L]) ExpectedWait(key string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.keys[key]
	if r == nil {
		return 0
	}
	return time.Duration(r.refs) * r.every
}

// maxStreak bounds how many grants in a row one process passes among its own
// waiters before the next process in the line gets the key. A hand-over here
// costs a third of a hand-off to another process (one round trip against a
// release, a wake-up message and an acquire), so a longer streak is faster;
// eight serves a process's waiters about once a turn while the other
// processes wait at most eight short sections longer for theirs.
const maxStreak = 8

// NextHere is the waiting room of the waiter here that the key, about to be
// released by a lease of by, a lined variant, should go to next; nil when
// nobody here waits, or when this process has passed the key among its own
// waiters maxStreak times in a row and the line's head is next. direct says
// whether the lease may be handed over to that waiter (Give): not to a
// waiter of another variant.
func (w *Waker[L]) NextHere(key string, by any) (r *Room[L], direct bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r = w.keys[key]
	if r == nil {
		return nil, false
	}
	if r.streak >= maxStreak {
		r.streak = 0
		return nil, false
	}
	r.streak++
	return r, !r.mixed && r.by == by
}

// Give puts a lease of by, handed over by its holder here, in r for the
// waiter whose turn it is, and reports whether it could: not once the room
// closed.
func (w *Waker[L]) Give(r *Room[L], by any, lease L) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.refs == 0 {
		return false
	}
	select {
	case r.handed <- handed[L]{lease: lease, by: by}:
	default: // cannot happen: only the lease's holder hands it over
		return false
	}
	r.wake()
	return true
}
