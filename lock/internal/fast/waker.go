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
	"log/slog"
	"sync"
	"sync/atomic"
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
	// Logger, if set, hears once of each node that publishes no keyspace
	// events.
	Logger *slog.Logger
}

// Waker turns Redis keyspace notifications (a lock key deleted or expired)
// and the wake-ups of a key's line into wake-ups for the waiters
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
	line   *line // the keys' waiting lines; nil without Config.Lines
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
	// probes is, by key, closed when a probe's delete is heard (probe).
	probes map[string]chan struct{}
	// mute marks, by node, one whose probe heard nothing: no keyspace
	// events there. muteLogged: that was logged.
	mute, muteLogged []atomic.Bool
}

// New is the waker of one set of lockers over nodes, first node first.
// validUntil is when a lease's validity ends; giveBack releases, off the
// caller's path, a lease handed over that nobody will use.
func New[L comparable](cfg Config, nodes []Node, validUntil func(L) time.Time, giveBack func(context.Context, L)) *Waker[L] {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Waker[L]{cfg: cfg, validUntil: validUntil, giveBack: giveBack, ctx: ctx, cancel: cancel, nodes: nodes,
		keys: map[string]*Room[L]{}, held: map[string]L{}, subscribed: map[string]int{},
		confirmed: map[string]chan struct{}{}, contended: map[string]time.Time{}, placed: map[string]time.Time{},
		probes: map[string]chan struct{}{}, mute: make([]atomic.Bool, len(nodes)), muteLogged: make([]atomic.Bool, len(nodes))}
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
