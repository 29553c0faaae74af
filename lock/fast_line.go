package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"flashsale/lock/internal/wire"
)

// This file is part of the speed layer (fast.go): the waiting line of a hot
// key across processes.

// line is the waiting line of a hot key across processes. Waking every
// waiting process at each release makes them all try at once: Redlock's SETs
// then reach the nodes in different orders, the votes split, and nobody
// reaches a quorum; on one node, all but one try fail, and each failed try
// costs CPU the holder needs. So a process that has to wait for a key of an
// owner-checked variant (lua, redlock and their fenced rungs) joins the key's
// line, a list on the first node, and a release wakes only the line's head,
// with a message on that process's own channel. Processes are served in the
// order they joined; within a process, waiters take turns (fast_wake.go), and a
// process passes the key among its own waiters at most maxStreak times in a
// row before the line's head gets it, taking a place at the back of the line
// in the same step if its own waiters still wait.
//
// The line orders wake-ups; it never grants anything. Every waiter still
// takes the lock with its variant's own acquire, so the safety argument is
// the variant's alone: a lost or stale wake-up costs time, never a second
// holder. What the line must not do is strand the lock:
//   - a waiter joins only while the lock key is on the first node, in one
//     step, and the release that follows wakes the head after deleting it;
//     a release that has seen no contention does not ask the line (an
//     uncontended lock pays nothing for it), so a process that joins an
//     empty line also wakes at the key's delete event;
//   - a head that is not waiting any more (it gave up, or holds the lock by
//     now) passes the wake-up on to the next in line;
//   - a head that crashed or paused never tries: the others still wake at
//     their backoff timers and by the key's expiry event, and the line
//     itself expires a TTL after its last join;
//   - when the first node is down, waiters fall back to the backoff.
type line struct {
	id      string // this set of lockers, as it stands in lines
	channel string // where its wake-ups arrive
	prefix  string // channel prefix: ns + "wake:"
	ns      string
	ttl     time.Duration
	timeout time.Duration // the per-node timeout
	late    time.Duration // lateWindow: how long an answering node is waited for
	first   *wire.Pipe
}

func newLine(cfg *config, first *wire.Pipe) *line {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	prefix := cfg.namespace + "wake:"
	return &line{id: id, channel: prefix + id, prefix: prefix, ns: cfg.namespace, ttl: cfg.ttl,
		timeout: cfg.nodeTimeout, late: cfg.lateWindow(), first: first}
}

// The scripts of the line, run on the first node.
var (
	// joinLine puts a waiting process at the back of a key's line, unless it
	// stands in it already, but only while the lock key is there: a release
	// that comes later then wakes the line's head. If the key is gone
	// already the caller should try at once. KEYS[1] lock, KEYS[2] line;
	// ARGV[1] process id, ARGV[2] line TTL ms. Returns the caller's place in
	// the line (1: the head), or 0 if the lock key is gone.
	joinLine = newScript(`
if redis.call("exists", KEYS[1]) == 0 then
	return 0
end
local place = redis.call("lpos", KEYS[2], ARGV[1])
if place then
	place = place + 1
else
	place = redis.call("rpush", KEYS[2], ARGV[1])
end
redis.call("pexpire", KEYS[2], ARGV[2])
return place`)

	// wakeHead takes the head of a key's line and tells it, by a message on
	// its own channel, that the lock was released; the caller's own id is
	// only returned, not published. A caller that will want the key again
	// (its own waiters still wait, or it may come straight back) goes to the
	// back of the line in the same step, unless it stands in it already,
	// once another process was woken (the line is not empty then, so a
	// release will come).
	// KEYS[1] line; ARGV[1] channel prefix, ARGV[2] message (the lock key),
	// ARGV[3] the caller's id, ARGV[4] the id to put back ("" for none),
	// ARGV[5] line TTL ms. Returns the head's id, or "" for an empty line.
	wakeHead = newScript(`
local head = redis.call("lpop", KEYS[1])
if not head then
	return ""
end
if head ~= ARGV[3] then
	redis.call("publish", ARGV[1] .. head, ARGV[2])
	if ARGV[4] ~= "" and not redis.call("lpos", KEYS[1], ARGV[4]) then
		redis.call("rpush", KEYS[1], ARGV[4])
		redis.call("pexpire", KEYS[1], ARGV[5])
	end
end
return head`)
)

// of is the line of a lock key ("<ns>lock:<name>" → "<ns>line:<name>").
func (q *line) of(lockKey string) string {
	return q.ns + "line:" + lockKey[len(q.ns+"lock:"):]
}

// noLine is join's answer when the line could not be asked.
const noLine = -1

// join puts this process at the back of the key's line, unless it stands
// in it already, and returns its place, 1 for the head. 0 means it did not
// join because the lock key is gone from the first node: try again now.
// noLine means the node did not answer: fall back to the backoff.
//
// As with Redlock's votes (quorum.go), slow here is not down there: past
// the per-node timeout, a first node that has answered since the join was
// sent, or whose answer waits unread (wire.Pipe.Answering), is waited for
// until the late window. Given up on at the timeout, a process too busy to
// read the answer in time would leave the line at every look, and its
// waiters would fall back to trying at their backoff, all processes at
// once, as if the first node were down. A first node that has owed an
// answer for a per-node timeout and sent nothing (frozen, cut off) is not
// asked at all: the waiter whose turn it is would otherwise hold every
// waiter here for a timeout at each look.
func (q *line) join(ctx context.Context, lockKey string) int64 {
	if q.first.Silent(q.timeout) {
		return noLine
	}
	start := time.Now()
	done := make(chan int64, 1)
	cmd := joinLine.eval([]string{lockKey, q.of(lockKey)}, q.id, strconv.FormatInt(q.ttl.Milliseconds(), 10))
	q.first.Send(cmd, wire.Integer, func(v any, _ string, err error) {
		n, err2 := wire.Int(v)
		if err != nil || err2 != nil {
			n = noLine
		}
		done <- n
	})
	t := time.NewTimer(q.timeout)
	defer t.Stop()
	for {
		select {
		case place := <-done:
			return place
		case <-t.C:
			rest := q.late - time.Since(start)
			if rest <= 0 || !q.first.Answering(start) {
				return noLine
			}
			t.Reset(rest)
		case <-ctx.Done():
			return noLine
		}
	}
}

// next wakes the head of the key's line after a release and tells done
// which process that was: "" when the line is empty or the first node did
// not answer (only this process can be told then), q.id when the head was
// this process's own place (no message is sent for it). With requeue, this
// process takes a place at the back in the same step when another process
// was woken, and done's requeued says it did.
func (q *line) next(lockKey string, requeue bool, done func(lockKey, head string, requeued bool)) {
	again := ""
	if requeue {
		again = q.id
	}
	cmd := wakeHead.eval([]string{q.of(lockKey)}, q.prefix, lockKey, q.id, again, strconv.FormatInt(q.ttl.Milliseconds(), 10))
	q.first.Send(cmd, wire.Bulk, func(v any, _ string, err error) {
		head, _ := v.(string)
		if err != nil {
			head = ""
		}
		done(lockKey, head, requeue && head != "" && head != q.id)
	})
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
	// A process that woke another's head takes a place behind it, whether
	// or not anyone waits here yet: its next waiter comes back within
	// microseconds (a batch, a loop) and would otherwise win the lock again
	// before the woken head could try, for as long as it keeps coming back.
	requeue := kw == nil || !kw.queued
	ask := kw != nil || ok
	if ask && kw == nil {
		// Taken before the line answers: the next waiter here may come
		// before the answer does. passed gives it back if the line is empty.
		w.placed[key] = time.Now()
	}
	w.mu.Unlock()
	if ask {
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
	if kw == nil && head == "" {
		delete(w.placed, key) // nobody to stand behind
	}
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
		// Our own place, stale: wake the next head, and take a place
		// behind it as toLine asked, unless someone here still waits.
		w.line.next(key, requeue || kw == nil, w.passed)
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
	delete(w.placed, key) // the line reached it: nobody here holds it now
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
// try now, below 0 the line could not be asked. A process that stands in
// the line asks it again only to look (look): the line may have lost its
// place (expired), and the key may be free with nobody to say so.
//
// A process that joins an empty line listens for the key's delete event,
// since the holder may not know anyone waits; and since the key may have
// gone while the subscription was on its way, it says try now once the
// node has confirmed it: a try that fails then is followed by the event.
func (w *waker) queue(ctx context.Context, key string, kw *keyWait, look bool) int64 {
	if w.line == nil {
		return noLine
	}
	w.mu.Lock()
	queued := kw.queued
	w.mu.Unlock()
	if queued && !look {
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
