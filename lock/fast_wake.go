package lock

import (
	"context"
	"sync"
	"time"

	"flashsale/lock/internal/node"
)

// This file is part of the speed layer (fast.go): the waiting rooms of a
// process and what wakes them (the notifications are heard in
// fast_listen.go).

// waker turns Redis keyspace notifications (a lock key deleted or expired)
// and the wake-ups of a key's line (fast_line.go) into wake-ups for the waiters
// of this process, so waiting costs one attempt per release instead of a
// polling storm. It subscribes to a key's events only while someone here
// waits for it and no line wakes them: an uncontended lock causes no
// notification traffic at all, and a hot key in line causes none either.
//
// Its rooms are plain memory; what talks to Redis is its listening: a
// pub/sub connection and a goroutine per node, and the subscription to this
// process's line channel. That runs only while the speed layer is on
// (listen, quiet): with the layer off nothing here opens a connection.
type waker struct {
	cancel context.CancelFunc
	ctx    context.Context // done when the lockers close
	nodes  []*node.Node
	line   *line // the keys' waiting lines (fast_line.go); nil without notifications
	// subMu is held while a key's subscription is matched to its
	// waiting room (sync), and while listening starts or stops; under it,
	// subscribed is the keys subscribed now, subs the nodes' pub/sub
	// connections while listening (nil otherwise), and stop ends them.
	subMu      sync.Mutex
	subscribed map[string]int // how many of subs, from the first, listen
	subs       []subscription
	stop       context.CancelFunc
	wg         sync.WaitGroup // the listening goroutines
	// confirmed is, by channel, closed when the node confirms a
	// subscription to it: only then is no later event missed.
	confirmed map[string]chan struct{}
	syncs     sync.WaitGroup // the syncs a closing room started
	// beforeSync, if set, runs as sync starts: tests use it to hold one
	// sync back while another room opens or closes.
	beforeSync func(key string)

	mu   sync.Mutex
	keys map[string]*keyWait // by Redis lock key
	// held is, by Redis lock key, a lease this process holds with an
	// owner-checked variant, until it is released or its validity ends.
	// While one is held, a delete event for its key is the late echo of the
	// release that let it in (a Redlock release deletes on every node, and
	// the events trail the direct wake-up): waking a waiter for it would
	// only cost a try that finds the lock busy. No other client can delete a value that is not its own —
	// unless a broken variant shares the key, and then the waiters here
	// wake at the lease's validity at the latest.
	held map[string]*Lease
	// contended is, by Redis lock key, when this process last stood in or
	// was woken by the key's line: its releases wake the line's head for a
	// TTL after that (passOn).
	contended map[string]time.Time
	// placed is, by Redis lock key, when a release here that woke another
	// process's head also put this process at the back of the key's line,
	// with nobody here waiting (toLine): the next waiter here takes that
	// place rather than trying at once, so the head it woke goes first.
	placed map[string]time.Time
}

// keyWait is the waiting room of one lock key in this process.
type keyWait struct {
	refs int
	// turn lets one waiter at a time try: blocked senders on a channel are
	// served in arrival order, which makes the wait fair and keeps a hot key
	// to one attempt per release from this process.
	turn chan struct{}
	// freed is closed, and replaced, whenever the key is deleted or expires.
	freed chan struct{}
	// line: the waiters stand in the key's line across processes
	// (fast_line.go); a delete event does not wake them, the line does, and
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
	// anyone waits (see passOn): it listens for the key's delete event.
	head bool
	// taken is freed as it was when a waiter of this process last acquired:
	// the next waiter knows the lock is held and waits for it to be freed
	// instead of trying straight away.
	taken chan struct{}
	// by is the locker of the room's waiters, unless mixed: waiters of
	// several variants wait for the key, and no lease is handed over.
	by    *Locker
	mixed bool
	// lastGrant is when a waiter here last got the lock, and every the
	// moving mean of the time between such grants: how fast this room's
	// waiters are served, whatever share of the key other processes get.
	lastGrant time.Time
	every     time.Duration
	// seen is what the room's last try found (busy, or the nodes down),
	// for a waiter whose wait runs out before a try of its own.
	seen error
	// given holds a lease handed over by the holder here (fast_handover.go)
	// until the waiter whose turn it is takes it; a room that closes with
	// one in it releases it.
	given chan *Lease
}

// listens reports whether the room needs the key's delete and expiry
// events: a room whose waiters are not in a line, the head of a line the
// holder may not know about, and a room whose line cannot be asked. The
// others are woken by the line; hearing every release of a hot key in every
// waiting process would cost each of them a wake-up per grant, CPU the
// holder needs.
func (kw *keyWait) listens() bool { return !kw.line || kw.head || kw.unlined }

// wake lets the room's next waiter try: it closes freed and puts a new one
// in its place. Called with the waker's mu held.
func (kw *keyWait) wake() {
	close(kw.freed)
	kw.freed = make(chan struct{})
}

func newWaker(cfg *config, nodes []*node.Node) *waker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &waker{ctx: ctx, cancel: cancel, nodes: nodes, keys: map[string]*keyWait{}, held: map[string]*Lease{}, subscribed: map[string]int{},
		confirmed: map[string]chan struct{}{}, contended: map[string]time.Time{}, placed: map[string]time.Time{}}
	if cfg.notifications {
		w.line = newLine(cfg, nodes[0].Pipe())
	}
	return w
}

// waiting reports whether anyone in this process waits for the key, or
// this process has a place in the key's line that a release here took for
// it (placed); a newcomer then queues instead of barging in.
func (w *waker) waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keys[key] != nil || w.hasPlace(key)
}

// hasPlace reports a place in the key's line taken by a release here within
// a TTL (the line itself expires a TTL after its last join). Called with mu
// held.
func (w *waker) hasPlace(key string) bool {
	at, ok := w.placed[key]
	if ok && time.Since(at) > w.line.ttl {
		delete(w.placed, key)
		ok = false
	}
	return ok
}

func (w *waker) close() {
	w.cancel()
	w.syncs.Wait()
	w.quiet()
}

func (w *waker) freed(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if kw := w.keys[key]; kw != nil {
		kw.wake()
	}
}

// hold notes a lease of an owner-checked variant.
func (w *waker) hold(key string, l *Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held[key] = l
}

// unhold forgets the lease when it is released.
func (w *waker) unhold(key string, l *Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held[key] == l {
		delete(w.held, key)
	}
}

// heldUntil is when the lease this process holds on key runs out, if it
// holds one of an owner-checked variant.
func (w *waker) heldUntil(key string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l := w.held[key]; l != nil {
		return l.ValidUntil(), true
	}
	return time.Time{}, false
}

// deleted wakes this process's waiters for a key that was deleted — by a
// release here, or as a keyspace event says — unless a lease here holds the
// key now: then the delete is the late echo of the release that let it in.
// Waiters in a key's line are woken by the line instead.
func (w *waker) deleted(key string) {
	w.mu.Lock()
	kw := w.keys[key]
	waitsForLine := kw != nil && !kw.listens()
	w.mu.Unlock()
	if !waitsForLine && !w.echo(key) {
		w.freed(key)
	}
}

// echo reports whether a delete of key can only be the echo of an earlier
// release, because a lease here holds the key now.
func (w *waker) echo(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.held[key]
	if l != nil && time.Now().After(l.ValidUntil()) {
		delete(w.held, key) // run out, or abandoned by a crash fault
		return false
	}
	return l != nil
}

// current is the channel the next deletion or expiry of the key will close.
func (w *waker) current(kw *keyWait) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return kw.freed
}

func (w *waker) lastTaken(kw *keyWait) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return kw.taken
}

// found notes what a try of the room's found; nil notes nothing.
func (w *waker) found(kw *keyWait, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	kw.seen = err
}

// told is what a waiter of the room whose wait runs out is told: what the
// room's last try found (its own tries are noted there too), else what its
// own try found before it joined (own), else busy. With no quorum
// possible every try finds the nodes down, and a waiter that had no turn
// since must say so too, not busy.
func (w *waker) told(kw *keyWait, own error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case kw.seen != nil:
		return kw.seen
	case own != nil:
		return own
	}
	return ErrNotAcquired
}
