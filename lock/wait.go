package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waker turns Redis keyspace notifications (a lock key deleted or expired)
// into wake-ups for the waiters of this process, so waiting costs one
// attempt per release instead of a polling storm. It subscribes to a key's
// events only while someone here waits for it: an uncontended lock causes no
// notification traffic at all.
type waker struct {
	cancel context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup
	subs   []subscription
	line   *line // the Redlock key lines (queue.go); nil without notifications
	// subMu is held while a key's subscription is brought in line with its
	// waiting room (sync); subscribed is, under it, the keys subscribed now.
	subMu      sync.Mutex
	subscribed map[string]bool
	syncs      sync.WaitGroup // the syncs a closing room started
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
}

// subscription is one node's pub/sub connection and its keyspace prefix.
type subscription struct {
	ps     *redis.PubSub
	prefix string // "__keyspace@<db>__:"
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
	// line: the waiters use Redlock and stand in the key's line across
	// processes (queue.go); a delete event does not wake them, the line does.
	line bool
	// streak counts the grants passed from waiter to waiter here since the
	// line last woke this process: after maxStreak the lock goes to the
	// line's head, so other processes get their turn.
	streak int
	// queued: this process stands in the key's line; it joins once, and
	// again only after the line woke it.
	queued bool
	// taken is freed as it was when a waiter of this process last acquired:
	// the next waiter knows the lock is held and waits for it to be freed
	// instead of trying straight away.
	taken chan struct{}
}

// wake lets the room's next waiter try: it closes freed and puts a new one
// in its place. Called with the waker's mu held.
func (kw *keyWait) wake() {
	close(kw.freed)
	kw.freed = make(chan struct{})
}

func newWaker(cfg *config, nodes []*node) *waker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &waker{ctx: ctx, cancel: cancel, keys: map[string]*keyWait{}, held: map[string]*Lease{}, subscribed: map[string]bool{}}
	if !cfg.notifications {
		return w
	}
	w.line = newLine(cfg, nodes[0])
	for i, n := range nodes {
		c := n.rdb
		sub := subscription{ps: c.Subscribe(ctx), prefix: fmt.Sprintf("__keyspace@%d__:", c.Options().DB)}
		if i == 0 {
			// This process's wake-ups from the Redlock key lines (queue.go).
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			_ = sub.ps.Subscribe(sctx, w.line.channel)
			scancel()
		}
		w.subs = append(w.subs, sub)
		w.wg.Go(func() {
			defer sub.ps.Close()
			ch := sub.ps.Channel()
			for {
				select {
				case <-ctx.Done():
					return
				case m, ok := <-ch:
					if !ok {
						return
					}
					if m.Channel == w.line.channel {
						w.handoff(m.Payload, false)
						continue
					}
					key := strings.TrimPrefix(m.Channel, sub.prefix)
					switch m.Payload {
					case "del":
						w.deleted(key)
					case "expired", "evicted":
						w.freed(key)
					}
				}
			}
		})
	}
	return w
}

// sync subscribes to the key's events on every node while a waiting room
// for it is open here, and unsubscribes once none is. Rooms open and close
// under mu, but the (un)subscribe calls run later, under subMu: so sync
// reads whether a room is open only once it holds subMu, and every open or
// close is followed by a sync. Whichever sync runs last then sees the last
// change, and a room that opens while an older one closes stays subscribed,
// whatever order the two syncs run in. A node that is down is skipped: its
// waiters fall back to the backoff (go-redis subscribes again on reconnect).
func (w *waker) sync(key string) {
	if w.beforeSync != nil {
		w.beforeSync(key)
	}
	w.subMu.Lock()
	defer w.subMu.Unlock()
	w.mu.Lock()
	want := w.keys[key] != nil
	w.mu.Unlock()
	if want == w.subscribed[key] {
		return
	}
	for _, s := range w.subs {
		ctx, cancel := context.WithTimeout(w.ctx, 100*time.Millisecond)
		if want {
			_ = s.ps.Subscribe(ctx, s.prefix+key)
		} else {
			_ = s.ps.Unsubscribe(ctx, s.prefix+key)
		}
		cancel()
	}
	if want {
		w.subscribed[key] = true
	} else {
		delete(w.subscribed, key)
	}
}

// waiting reports whether anyone in this process waits for the key; a
// newcomer then queues behind them instead of barging in.
func (w *waker) waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keys[key] != nil
}

func (w *waker) close() {
	w.cancel()
	w.syncs.Wait()
	w.wg.Wait()
}

func (w *waker) join(key string) *keyWait {
	w.mu.Lock()
	kw := w.keys[key]
	opened := kw == nil
	if opened {
		kw = &keyWait{turn: make(chan struct{}, 1), freed: make(chan struct{})}
		w.keys[key] = kw
	}
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
	if closed {
		delete(w.keys, key)
	}
	w.mu.Unlock()
	if closed {
		// Off the caller's path: a node that does not answer would hold a
		// lease back from its holder while its validity runs.
		w.syncs.Add(1)
		go func() {
			defer w.syncs.Done()
			w.sync(key)
		}()
	}
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
	inLine := kw != nil && kw.line
	w.mu.Unlock()
	if !inLine && !w.echo(key) {
		w.freed(key)
	}
}

// maxStreak bounds how many grants in a row one process passes among its own
// waiters before the next process in the line gets the key.
const maxStreak = 4

// passOn hands a Redlock key this process just released to its next waiter:
// one here, while the streak lasts, else the head of the key's line.
func (w *waker) passOn(key string) {
	if w.line == nil {
		w.deleted(key)
		return
	}
	w.mu.Lock()
	kw := w.keys[key]
	local := kw != nil && kw.streak < maxStreak
	if local {
		kw.streak++
		kw.wake()
	} else if kw != nil {
		kw.streak = 0
	}
	w.mu.Unlock()
	if !local {
		w.line.next(key, w.passed)
	}
}

// passed is the answer to passOn's wake-up: an empty line leaves the key to
// the waiters here, if any; a place of this process's own in the line is
// skipped, since this process is passing the key on.
func (w *waker) passed(key string, empty bool) {
	if !empty {
		// Our own place, taken out of the line: join again when waiting.
		w.mu.Lock()
		if kw := w.keys[key]; kw != nil {
			kw.queued = false
		}
		w.mu.Unlock()
		w.line.next(key, w.passed)
		return
	}
	w.freed(key)
}

// handoff is a wake-up from the key's line for this process: its next waiter
// tries, or, if nobody here waits for the key any more, the line's next head
// is woken instead, so a stale place in the line cannot strand the lock. An
// empty line (empty) wakes a waiter here, if any, and nobody else.
func (w *waker) handoff(key string, empty bool) {
	w.mu.Lock()
	kw := w.keys[key]
	if kw != nil {
		kw.streak, kw.queued = 0, false
		kw.wake()
	}
	w.mu.Unlock()
	if kw == nil && !empty {
		w.line.next(key, w.handoff)
	}
}

// queue puts this process in the key's line, unless it stands there already,
// and reports whether it does.
func (w *waker) queue(ctx context.Context, key string, kw *keyWait) bool {
	if w.line == nil {
		return false
	}
	w.mu.Lock()
	queued := kw.queued
	w.mu.Unlock()
	if queued {
		return true
	}
	ok := w.line.join(ctx, key)
	w.mu.Lock()
	kw.queued = ok
	w.mu.Unlock()
	return ok
}

// inLine marks the waiters of a key as standing in its line.
func (w *waker) inLine(kw *keyWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw.line = true
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

func (w *waker) markTaken(kw *keyWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw.taken = kw.freed
}

func (w *waker) lastTaken(kw *keyWait) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return kw.taken
}

// acquire waits its turn among this process's waiters, then tries; after a
// busy answer it sleeps until the key is freed or a jittered backoff
// (doubling from backoffMin to backoffMax) runs out, whichever comes first.
// Busy and unavailable answers are retried until ctx is done; a crash is not.
func (l *Locker) acquire(ctx context.Context, name string) (*Lease, int, error) {
	key := l.keysFor(name).lock
	tries := 0
	if !l.wake.waiting(key) {
		// Nobody here waits: one try before opening a waiting room.
		lease, err := l.try(ctx, name)
		tries++
		switch {
		case err == nil || !retryable(err):
			return lease, tries, err
		case ctx.Err() != nil:
			return nil, tries, errors.Join(telling(err, ErrNotAcquired), context.Cause(ctx))
		}
	}
	kw := l.wake.join(key)
	defer l.wake.leave(key, kw)
	// Redlock's waiters in several processes must not all try at once: their
	// votes would split. They stand in the key's line (queue.go).
	_, inLine := l.v.(orderedRelease)
	if inLine {
		l.wake.inLine(kw)
	}

	select {
	case kw.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, errors.Join(ErrNotAcquired, context.Cause(ctx))
	}
	defer func() { <-kw.turn }()

	wait := l.wake.lastTaken(kw)
	backoff := l.cfg.backoffMin
	var last error = ErrNotAcquired
	for {
		if wait != nil && !closed(wait) {
			// A lease held here ends with a release that wakes us directly,
			// or at its validity: no try before then can succeed. Anyone
			// else's lease ends with a keyspace event — or, for Redlock, a
			// wake-up from the key's line, which this process joins now.
			// The backoff covers wake-ups that never come.
			d := backoff/2 + rand.N(backoff/2+1)
			if inLine && l.wake.queue(ctx, key, kw) {
				d = l.cfg.backoffMax/2 + rand.N(l.cfg.backoffMax/2+1)
			}
			if until, ok := l.wake.heldUntil(key); ok {
				d = max(time.Until(until), d)
			}
			t := time.NewTimer(d)
			select {
			case <-wait:
			case <-t.C:
				backoff = min(2*backoff, l.cfg.backoffMax)
			case <-ctx.Done():
				t.Stop()
				return nil, tries, errors.Join(last, context.Cause(ctx))
			}
			t.Stop()
		}
		freed := l.wake.current(kw) // before trying, so a release during the try is not missed
		lease, err := l.try(ctx, name)
		tries++
		switch {
		case err == nil:
			l.wake.markTaken(kw)
			return lease, tries, nil
		case !retryable(err):
			return nil, tries, err
		case ctx.Err() != nil:
			return nil, tries, errors.Join(telling(err, last), context.Cause(ctx))
		}
		last, wait = err, freed
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

// retryable errors are worth waiting out: busy, or nodes not answering.
func retryable(err error) bool {
	return errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrUnavailable)
}

// telling picks what to report for a try that ended with the caller's
// context: its own error if a node really failed (refused the connection,
// say), else what the tries before it found. A try merely cut short by the
// deadline says nothing about Redis being down.
func telling(err, before error) error {
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

// timedOut reports an error that only says time ran out: the context's, or
// the connection deadline the client derives from it.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
