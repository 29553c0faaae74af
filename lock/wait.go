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
// and the wake-ups of a key's line (queue.go) into wake-ups for the waiters
// of this process, so waiting costs one attempt per release instead of a
// polling storm. It subscribes to a key's events only while someone here
// waits for it and no line wakes them: an uncontended lock causes no
// notification traffic at all, and a hot key in line causes none either.
type waker struct {
	cancel context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup
	subs   []subscription
	line   *line // the Redlock key lines (queue.go); nil without notifications
	// subMu is held while a key's subscription is brought in line with its
	// waiting room (sync); subscribed is, under it, the keys subscribed now.
	subMu      sync.Mutex
	subscribed map[string]int // how many of subs, from the first, listen
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
	// line: the waiters stand in the key's line across processes
	// (queue.go); a delete event does not wake them, the line does, and
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
	// given holds a lease handed over by the holder here (handover.go)
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

func newWaker(cfg *config, nodes []*node) *waker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &waker{ctx: ctx, cancel: cancel, keys: map[string]*keyWait{}, held: map[string]*Lease{}, subscribed: map[string]int{},
		confirmed: map[string]chan struct{}{}, contended: map[string]time.Time{}}
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
			ch := sub.ps.ChannelWithSubscriptions()
			for {
				select {
				case <-ctx.Done():
					return
				case msg, ok := <-ch:
					if !ok {
						return
					}
					m, ok := msg.(*redis.Message)
					if !ok {
						if s, ok := msg.(*redis.Subscription); ok && s.Kind == "subscribe" {
							w.confirm(s.Channel)
						}
						continue
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

// sync subscribes to the key's events on the first node that answers while a
// waiting room for it is open here, and unsubscribes once none is. Rooms open and close
// under mu, but the (un)subscribe calls run later, under subMu: so sync
// reads whether a room is open only once it holds subMu, and every open or
// close is followed by a sync. Whichever sync runs last then sees the last
// change, and a room that opens while an older one closes stays subscribed,
// whatever order the two syncs run in. A node that does not answer keeps the
// subscription (go-redis subscribes again on reconnect) and the next node is
// asked too; with every node down the waiters fall back to the backoff.
func (w *waker) sync(key string) {
	if w.beforeSync != nil {
		w.beforeSync(key)
	}
	w.subMu.Lock()
	defer w.subMu.Unlock()
	w.mu.Lock()
	kw := w.keys[key]
	want := kw != nil && kw.listens()
	w.mu.Unlock()
	n, had := w.subscribed[key]
	if want == had {
		return
	}
	if !want {
		for _, s := range w.subs[:n] {
			ctx, cancel := context.WithTimeout(w.ctx, 100*time.Millisecond)
			_ = s.ps.Unsubscribe(ctx, s.prefix+key)
			cancel()
		}
		delete(w.subscribed, key)
		return
	}
	// The first node's events are enough: it is the single-node variants'
	// node and holds the Redlock lines, and one node deleting a Redlock key
	// means its holder released it. Every event wakes every process that
	// listens, so listening to five nodes costs five wake-ups per release
	// in each waiting process: on a busy machine, CPU the holder needs. The
	// next node is asked only while the one before it does not answer.
	for _, s := range w.subs {
		n++
		if w.subscribe(s, s.prefix+key) {
			break
		}
	}
	w.subscribed[key] = n
}

// subscribe subscribes s to channel and waits, 100 ms at most, until the
// node confirms it: from then on no event of the channel is missed.
func (w *waker) subscribe(s subscription, channel string) bool {
	ctx, cancel := context.WithTimeout(w.ctx, 100*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	w.mu.Lock()
	w.confirmed[channel] = done
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		if w.confirmed[channel] == done {
			delete(w.confirmed, channel)
		}
		w.mu.Unlock()
	}()
	if err := s.ps.Subscribe(ctx, channel); err != nil {
		return false
	}
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// confirm is a node's confirmation of a subscription to channel.
func (w *waker) confirm(channel string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if done := w.confirmed[channel]; done != nil {
		close(done)
		delete(w.confirmed, channel)
	}
}

// resync brings the key's subscription in line with its room off the
// caller's path, after the room's need of the key's events changed.
func (w *waker) resync(key string) {
	w.syncs.Add(1)
	go func() {
		defer w.syncs.Done()
		w.sync(key)
	}()
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

// join enters a waiter of by, whose waiters stand in the key's line if lined,
// in the key's waiting room, opening it if nobody here waits yet.
func (w *waker) join(key string, by *Locker, lined bool) *keyWait {
	w.mu.Lock()
	kw := w.keys[key]
	opened := kw == nil
	if opened {
		kw = &keyWait{turn: make(chan struct{}, 1), freed: make(chan struct{}), given: make(chan *Lease, 1),
			line: lined && w.line != nil, by: by}
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

// toLine wakes the head of the key's line once the key, held with a variant
// whose waiters stand in line, is released and no waiter here is next.
//
// Asking the line costs a round trip to the first node, so a release that
// has seen no contention skips it: nobody waits here, and this process has
// not stood in the key's line for a TTL. Another process may have joined
// the line while this one held the key, unseen; but then it joined an empty
// line, and the head of an empty line also wakes at the key's delete event.
func (w *waker) toLine(key string) {
	if w.line == nil {
		w.deleted(key)
		return
	}
	w.mu.Lock()
	kw := w.keys[key]
	seen, ok := w.contended[key]
	if ok && time.Since(seen) > w.line.ttl {
		delete(w.contended, key)
		ok = false
	}
	requeue := kw != nil && !kw.queued
	w.mu.Unlock()
	if kw != nil || ok {
		w.line.next(key, requeue, w.passed)
	}
}

// passed is the answer to passOn's wake-up. An empty line leaves the key to
// the waiters here, if any. A place of this process's own in the line is
// skipped, since this process is passing the key on. Once another process
// is woken, the waiters here stand at the back of the line: the wake-up put
// them there (requeued) in the same step, unless they stood in it already:
// they are asleep, counting on the line to wake them.
func (w *waker) passed(key, head string, requeued bool) {
	w.mu.Lock()
	kw := w.keys[key]
	requeue, deaf := false, false
	if kw != nil {
		switch head {
		case "", w.line.id: // no place of ours is left in the line
			deaf = kw.head
			kw.queued, kw.head = false, false
			requeue = true
		default:
			kw.queued = kw.queued || requeued
		}
	}
	w.mu.Unlock()
	if deaf {
		w.resync(key)
	}
	switch head {
	case "":
		w.freed(key)
	case w.line.id:
		w.line.next(key, requeue, w.passed)
	}
}

// handoff is a wake-up from the key's line for this process: its next waiter
// tries, or, if nobody here waits for the key any more, the line's next head
// is woken instead, so a stale place in the line cannot strand the lock. An
// empty line (empty) wakes a waiter here, if any, and nobody else.
func (w *waker) handoff(key string, empty bool) {
	w.mu.Lock()
	kw := w.keys[key]
	deaf := false
	if kw != nil {
		deaf = kw.head
		kw.streak, kw.queued, kw.head = 0, false, false
		kw.wake()
	}
	w.contended[key] = time.Now()
	w.mu.Unlock()
	if deaf {
		w.resync(key)
	}
	if kw == nil && !empty {
		w.line.next(key, false, func(key, head string, _ bool) {
			if head == "" || head == w.line.id {
				w.handoff(key, head == "")
			}
		})
	}
}

// queue puts this process in the key's line, unless it stands there already,
// and reports its place as line.join does: above 0 it stands in the line, 0
// try now, below 0 the line could not be asked.
//
// A process that joins an empty line listens for the key's delete event,
// since the holder may not know anyone waits; and since the key may have
// gone while the subscription was on its way, it says try now once the
// node has confirmed it: a try that fails then is followed by the event.
func (w *waker) queue(ctx context.Context, key string, kw *keyWait) int64 {
	if w.line == nil {
		return noLine
	}
	w.mu.Lock()
	queued := kw.queued
	w.mu.Unlock()
	if queued {
		return 1
	}
	place := w.line.join(ctx, key)
	w.mu.Lock()
	was := kw.listens()
	kw.queued, kw.head, kw.unlined = place > 0, place == 1, place == noLine
	if place > 0 {
		w.contended[key] = time.Now()
	}
	now := kw.listens()
	w.mu.Unlock()
	switch {
	case now && !was:
		w.sync(key) // on the waiter's path: it must not miss the event
		if place == 1 {
			return 0
		}
	case was && !now:
		w.resync(key)
	}
	return place
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
	// Waiters in several processes must not all try at once: Redlock's votes
	// would split, and every failed try costs CPU the holder needs. The
	// owner-checked variants' waiters stand in the key's line (queue.go).
	inLine := l.lined()
	kw := l.wake.join(key, l, inLine)
	defer l.wake.leave(key, kw)

	select {
	case kw.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, errors.Join(ErrNotAcquired, context.Cause(ctx))
	}
	defer func() { <-kw.turn }()

	wait := l.wake.lastTaken(kw)
	if wait == nil && inLine {
		// A room that does not hear the key's events has nothing to gain
		// from a second try now: it joins the line first.
		wait = l.wake.current(kw)
	}
	backoff := l.cfg.backoffMin
	var last error = ErrNotAcquired
	for {
		if lease, ok := l.received(kw); ok {
			return l.receive(ctx, lease, tries+1)
		}
		if wait != nil && !closed(wait) {
			// A lease held here ends with a release that wakes us directly,
			// or at its validity: no try before then can succeed. Anyone
			// else's lease ends with a keyspace event — or, for Redlock, a
			// wake-up from the key's line, which this process joins now.
			// The backoff covers wake-ups that never come.
			d := backoff/2 + rand.N(backoff/2+1)
			if inLine {
				switch place := l.wake.queue(ctx, key, kw); {
				case place > 0:
					d = l.cfg.backoffMax/2 + rand.N(l.cfg.backoffMax/2+1)
				case place == 0:
					d = 0 // the key is gone already: no event will come for it
				}
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
				if lease, ok := l.received(kw); ok { // handed over in time
					return l.receive(ctx, lease, tries+1)
				}
				return nil, tries, errors.Join(last, context.Cause(ctx))
			}
			t.Stop()
			if lease, ok := l.received(kw); ok { // a hand-over wakes the room too
				return l.receive(ctx, lease, tries+1)
			}
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
