// Package fast is the lock's speed layer beneath its seam in package lock:
// the waiting rooms of a process and what wakes them (keyspace events, a
// waiting line per hot key across processes), and the bookkeeping that lets
// a release pass the key to the next waiter here. It decides who tries next
// and when; it never grants. It knows lock keys as strings, and a lease and
// a waiter's locker only as opaque values: the Locker makes every try and
// every hand-over itself.
package fast

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/wire"
)

// Node is one Redis node as the speed layer reaches it: a client for the
// pub/sub connections and the votes' pipelined connection, which carries
// the line's scripts on the first node and says when a node is silent.
type Node interface {
	Client() *redis.Client
	Pipe() *wire.Pipe
}

// Config is what the speed layer needs of the lockers' configuration.
type Config struct {
	TTL       time.Duration // the leases' TTL: a line, and a place in it, last as long
	Timeout   time.Duration // the per-node timeout
	Late      time.Duration // how long a node that still answers is waited for
	Namespace string        // the prefix of every key and channel
	// Lines turns the waiting lines and the keyspace wake-ups on; off, the
	// waiters fall back to the backoff.
	Lines bool
	// BackoffMin and BackoffMax bound a waiter's jittered fallback delay,
	// which doubles from the one to the other.
	BackoffMin, BackoffMax time.Duration
}

// Waker turns Redis keyspace notifications (a lock key deleted or expired)
// and the wake-ups of a key's line (line.go) into wake-ups for the waiters
// of this process, so waiting costs one attempt per release instead of a
// polling storm. It subscribes to a key's events only while someone here
// waits for it and no line wakes them: an uncontended lock causes no
// notification traffic at all, and a hot key in line causes none either.
//
// Its rooms are plain memory; what talks to Redis is its listening: a
// pub/sub connection and a goroutine per node, and the subscription to this
// process's line channel. That runs only between Listen and Quiet: with the
// speed layer off nothing here opens a connection.
//
// L is the Locker's lease; the waker only stores, compares and passes it
// on.
type Waker[L comparable] struct {
	cfg        Config
	validUntil func(L) time.Time
	giveBack   func(context.Context, L) // releases, off the caller's path, a lease nobody will use

	cancel context.CancelFunc
	ctx    context.Context // done when the lockers close
	nodes  []Node
	line   *line // the keys' waiting lines (line.go); nil without Config.Lines
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
	keys map[string]*Room[L] // by Redis lock key
	// held is, by Redis lock key, a lease this process holds with a lined
	// variant, until it is released or its validity ends. While one is
	// held, a delete event for its key is the late echo of the release that
	// let it in (a Redlock release deletes on every node, and the events
	// trail the direct wake-up): waking a waiter for it would only cost a
	// try that finds the lock busy. No other client can delete a value that
	// is not its own — unless a broken variant shares the key, and then the
	// waiters here wake at the lease's validity at the latest.
	held map[string]L
	// contended is, by Redis lock key, when this process last stood in or
	// was woken by the key's line: its releases wake the line's head for a
	// TTL after that (ToLine).
	contended map[string]time.Time
	// placed is, by Redis lock key, when a release here that woke another
	// process's head also put this process at the back of the key's line,
	// with nobody here waiting (ToLine): the next waiter here takes that
	// place rather than trying at once, so the head it woke goes first.
	placed map[string]time.Time
}

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
	// (line.go); a delete event does not wake them, the line does, and
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

// New is the waker of one set of lockers over nodes, first node first.
// validUntil is when a lease's validity ends; giveBack releases, off the
// caller's path, a lease handed over that nobody will use.
func New[L comparable](cfg Config, nodes []Node, validUntil func(L) time.Time, giveBack func(context.Context, L)) *Waker[L] {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Waker[L]{cfg: cfg, validUntil: validUntil, giveBack: giveBack, ctx: ctx, cancel: cancel, nodes: nodes,
		keys: map[string]*Room[L]{}, held: map[string]L{}, subscribed: map[string]int{},
		confirmed: map[string]chan struct{}{}, contended: map[string]time.Time{}, placed: map[string]time.Time{}}
	if cfg.Lines {
		w.line = newLine(cfg, nodes[0])
	}
	return w
}

// Close stops the waker's listening and waits for the syncs under way.
func (w *Waker[L]) Close() {
	w.cancel()
	w.syncs.Wait()
	w.Quiet()
}

// Waiting reports whether anyone in this process waits for the key, or
// this process has a place in the key's line that a release here took for
// it (placed); a newcomer then queues instead of barging in.
func (w *Waker[L]) Waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keys[key] != nil || w.hasPlace(key)
}

// hasPlace reports a place in the key's line taken by a release here within
// a TTL (the line itself expires a TTL after its last join). Called with mu
// held.
func (w *Waker[L]) hasPlace(key string) bool {
	at, ok := w.placed[key]
	if ok && time.Since(at) > w.line.ttl {
		delete(w.placed, key)
		ok = false
	}
	return ok
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

// Freed wakes the next waiter here for the key, whatever woke it.
func (w *Waker[L]) Freed(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.keys[key]; r != nil {
		r.wake()
	}
}

// Hold notes a lease of a lined variant that this process now holds: a
// delete event for its key is then the echo of an older release.
func (w *Waker[L]) Hold(key string, lease L) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held[key] = lease
}

// Unhold forgets the lease when it is released.
func (w *Waker[L]) Unhold(key string, lease L) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h, ok := w.held[key]; ok && h == lease {
		delete(w.held, key)
	}
}

// heldUntil is when the lease this process holds on key runs out, if it
// holds one of a lined variant.
func (w *Waker[L]) heldUntil(key string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h, ok := w.held[key]; ok {
		return w.validUntil(h), true
	}
	return time.Time{}, false
}

// Deleted wakes this process's waiters for a key that was deleted — by a
// release here, or as a keyspace event says — unless a lease here holds the
// key now: then the delete is the late echo of the release that let it in.
// Waiters in a key's line are woken by the line instead.
func (w *Waker[L]) Deleted(key string) {
	w.mu.Lock()
	r := w.keys[key]
	waitsForLine := r != nil && !r.listens()
	w.mu.Unlock()
	if !waitsForLine && !w.echo(key) {
		w.Freed(key)
	}
}

// echo reports whether a delete of key can only be the echo of an earlier
// release, because a lease here holds the key now.
func (w *Waker[L]) echo(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.held[key]
	if ok && time.Now().After(w.validUntil(h)) {
		delete(w.held, key) // run out, or abandoned by a crash fault
		return false
	}
	return ok
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
