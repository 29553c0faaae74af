package fast

import (
	"context"
	"math/rand/v2"
	"time"
)

// lineSlack bounds how long a waiter in a key's line sleeps between looks
// at the key. A waiter must not sleep while the key is free: whatever the
// line holds (a stale or dead place ahead of it, or a line that expired),
// it notices a free key within lineSlack plus one round trip to the first
// node.
const lineSlack = 50 * time.Millisecond

// Waiter is one Acquire's wait for a key: it says when a try is worth
// making and hands it a lease passed over meanwhile; the Locker makes the
// tries and tells it what they found. Close it when the wait ends.
type Waiter[L comparable] struct {
	w     *Waker[L]
	key   string
	by    any
	lined bool
	alone bool     // nobody here waited as it came: one try before the room
	room  *Room[L] // nil until it joins
	turn  bool     // it holds the room's turn
	given bool     // a lease was handed over to it
	// wait closes when a try is worth making again; nil: try now. freed is
	// the room's freed channel as the last try began.
	wait, freed <-chan struct{}
	own         error // what its own last try found
	backoff     time.Duration
}

// Wait starts a wait of by for the key. lined says by's variant frees a
// key only by its holder's release or its TTL (the owner-checked ones):
// its waiters stand in the key's line, and a lease of it held here makes a
// delete event of the key the echo of an older release.
func (w *Waker[L]) Wait(key string, by any, lined bool) *Waiter[L] {
	return &Waiter[L]{w: w, key: key, by: by, lined: lined, alone: !w.Waiting(key), backoff: w.cfg.BackoffMin}
}

// Next waits until a try is worth making and reports true; false when ctx
// ended first. A lease handed over meanwhile to this waiter ends the wait
// too: it is returned, and it is the waiter's now.
func (q *Waiter[L]) Next(ctx context.Context) (handed L, ok bool) {
	if q.alone {
		q.alone = false
		return handed, true
	}
	if q.room == nil && !q.enter(ctx) {
		return handed, false
	}
	if lease, ok := q.take(); ok {
		return lease, true
	}
	if q.wait != nil && !closed(q.wait) {
		err := q.w.doze(ctx, q.key, q.room, q.wait, &q.backoff)
		if lease, ok := q.take(); ok { // a hand-over wakes the room too
			return lease, true
		}
		if err != nil {
			return handed, false
		}
	}
	q.freed = q.w.current(q.room) // before trying, so a release during the try is not missed
	return handed, true
}

// enter joins the key's room and waits for the waiter's turn. Waiters in
// several processes must not all try at once: Redlock's votes would split,
// and every failed try costs CPU the holder needs; the lined variants'
// waiters stand in the key's line.
func (q *Waiter[L]) enter(ctx context.Context) bool {
	q.room = q.w.Join(q.key, q.by, q.lined)
	q.w.found(q.room, q.own)
	select {
	case q.room.turn <- struct{}{}:
		q.turn = true
	case <-ctx.Done():
		return false
	}
	q.wait = q.w.lastTaken(q.room)
	if q.wait == nil && q.room.line {
		// A room that does not hear the key's events has nothing to gain
		// from a second try now: it joins the line first.
		q.wait = q.w.current(q.room)
	}
	return true
}

// take takes a lease handed over to the room, if one is there, for the
// waiter whose turn it is. A lease of another variant on the same key (a
// room serves every variant) is not this waiter's: it is given back.
func (q *Waiter[L]) take() (lease L, ok bool) {
	select {
	case h := <-q.room.handed:
		if h.by != q.by {
			q.w.giveBack(q.w.ctx, h.lease)
			return lease, false
		}
		q.w.markTaken(q.room)
		q.given = true
		return h.lease, true
	default:
		return lease, false
	}
}

// Found notes what the waiter's last try found (nil: nothing worth
// noting); a try after it waits for the key to be freed again.
func (q *Waiter[L]) Found(err error) {
	q.own = err
	if q.room != nil {
		q.wait = q.freed
		q.w.found(q.room, err)
	}
}

// Report is what the waiter tells if its wait runs out now: what its room's
// last try found, else its own, else nil (busy).
func (q *Waiter[L]) Report() error {
	if q.room == nil {
		return q.own
	}
	return q.w.told(q.room, q.own)
}

// Close ends the wait, noting the lease it ended with (zero: none): it
// gives up its turn and leaves the room.
func (q *Waiter[L]) Close(lease L) {
	var none L
	if lease != none && !q.given {
		// Taken by the waiter's own try: a hand-over noted its lease already.
		if q.room != nil {
			q.w.markTaken(q.room)
		}
		if q.lined {
			q.w.Hold(q.key, lease)
		}
	}
	if q.turn {
		<-q.room.turn
	}
	if q.room != nil {
		q.w.Leave(q.key, q.room)
	}
}

// doze sleeps until the key is likely free: wait closes (a release here, a
// keyspace event, the line's wake-up), a waiter in line finds the key gone
// when it looks (every lineSlack), or the jittered backoff runs out for a
// waiter that is not in line. It returns ctx's error if ctx ends first.
func (w *Waker[L]) doze(ctx context.Context, key string, r *Room[L], wait <-chan struct{}, backoff *time.Duration) error {
	look := false // the first round joins the line; later ones look again
	for {
		// A lease held here ends with a release that wakes us directly, or
		// at its validity: no try before then can succeed.
		d := *backoff/2 + rand.N(*backoff/2+1)
		place := int64(noLine)
		if r.line {
			switch place = w.queue(ctx, key, r, look); {
			case place > 0:
				d = min(lineSlack, w.cfg.BackoffMax)
			case place == 0:
				return nil // the key is gone already: no event will come for it
			}
		}
		if until, ok := w.heldUntil(key); ok {
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
			*backoff = min(2**backoff, w.cfg.BackoffMax)
			return nil
		}
		look = true
	}
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
