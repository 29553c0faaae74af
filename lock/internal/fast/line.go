package fast

import (
	"context"
	"strconv"
	"time"

	"flashsale/internal/randhex"
	"flashsale/lock/internal/keys"
	"flashsale/lock/internal/wire"
)

// line is the waiting line of a hot key across processes: a list on the
// first node that a waiting process joins, and a release that wakes only
// the line's head, by a message on that process's own channel, so that one
// try follows a release instead of a storm. It orders wake-ups and never
// grants; how it keeps from stranding the lock is in docs/design.md ("The
// speed layer").
type line struct {
	id      string // this set of lockers, as it stands in lines
	channel string // where its wake-ups arrive
	prefix  string // channel prefix: ns + "wake:"
	ns      string
	ttl     time.Duration
	timeout time.Duration // the per-node timeout
	late    time.Duration // Config.Late: how long an answering node is waited for
	first   *wire.Pipe
}

func newLine(cfg Config, first Node) *line {
	id := randhex.String(8)
	prefix := cfg.Namespace + "wake:"
	return &line{id: id, channel: prefix + id, prefix: prefix, ns: cfg.Namespace, ttl: cfg.TTL,
		timeout: cfg.Timeout, late: cfg.Late, first: first.Pipe()}
}

// The scripts of the line, run on the first node.
var (
	// joinLine puts a waiting process at the back of a key's line, unless it
	// stands in it already, but only while the lock key is there: a release
	// that comes later then wakes the line's head. If the key is gone
	// already the caller should try at once. KEYS[1] lock, KEYS[2] line;
	// ARGV[1] process id, ARGV[2] line TTL ms. Returns the caller's place in
	// the line (1: the head), or 0 if the lock key is gone.
	joinLine = `
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
return place`

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
	wakeHead = `
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
return head`
)

// eval is the command that runs a script of the line on the first node's
// pipe (EVAL: Redis caches the compiled script by its hash either way).
func eval(src string, keys []string, args ...string) []string {
	cmd := append(make([]string, 0, 3+len(keys)+len(args)), "EVAL", src, strconv.Itoa(len(keys)))
	return append(append(cmd, keys...), args...)
}

// of is the line of a lock key ("<ns>lock:<name>" → "<ns>line:<name>").
func (q *line) of(lockKey string) string {
	return keys.Line(q.ns, keys.Name(q.ns, lockKey))
}

// noLine is join's answer when the line could not be asked.
const noLine = -1

// join puts this process at the back of the key's line, unless it stands
// in it already, and returns its place, 1 for the head. 0 means it did not
// join because the lock key is gone from the first node: try again now.
// noLine means the node did not answer: fall back to the backoff.
//
// As with Redlock's votes, slow here is not down there: past
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
	cmd := eval(joinLine, []string{lockKey, q.of(lockKey)}, q.id, strconv.FormatInt(q.ttl.Milliseconds(), 10))
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
	cmd := eval(wakeHead, []string{q.of(lockKey)}, q.prefix, lockKey, q.id, again, strconv.FormatInt(q.ttl.Milliseconds(), 10))
	q.first.Send(cmd, wire.Bulk, func(v any, _ string, err error) {
		head, _ := v.(string)
		if err != nil {
			head = ""
		}
		done(lockKey, head, requeue && head != "" && head != q.id)
	})
}

// ToLine wakes the head of the key's line once the key, held with a variant
// whose waiters stand in line, is released and no waiter here is next.
//
// Asking the line costs a round trip to the first node, so a release that
// has seen no contention skips it: nobody waits here, and this process has
// not stood in the key's line for a TTL. Another process may have joined
// the line while this one held the key, unseen; but then it joined an empty
// line, and the head of an empty line also wakes at the key's delete event.
func (w *Waker[L]) ToLine(key string) {
	if w.line == nil {
		w.Deleted(key)
		return
	}
	w.mu.Lock()
	r := w.keys[key]
	seen, ok := w.contended[key]
	if ok && time.Since(seen) > w.line.ttl {
		delete(w.contended, key)
		ok = false
	}
	// A process that woke another's head takes a place behind it, whether
	// or not anyone waits here yet: its next waiter comes back within
	// microseconds (a batch, a loop) and would otherwise win the lock again
	// before the woken head could try, for as long as it keeps coming back.
	requeue := r == nil || !r.queued
	ask := r != nil || ok
	if ask && r == nil {
		// Taken before the line answers: the next waiter here may come
		// before the answer does. passed gives it back if the line is empty.
		w.placed[key] = time.Now()
	}
	w.mu.Unlock()
	if ask {
		w.line.next(key, requeue, w.passed)
	}
}

// passed is the answer to ToLine's wake-up. An empty line leaves the key to
// the waiters here, if any. A place of this process's own in the line is
// skipped, since this process is passing the key on. Once another process
// is woken, the waiters here stand at the back of the line: the wake-up put
// them there (requeued) in the same step, unless they stood in it already:
// they are asleep, counting on the line to wake them.
func (w *Waker[L]) passed(key, head string, requeued bool) {
	w.mu.Lock()
	r := w.keys[key]
	requeue, deaf := false, false
	if r == nil && head == "" {
		delete(w.placed, key) // nobody to stand behind
	}
	if r != nil {
		switch head {
		case "", w.line.id: // no place of ours is left in the line
			deaf = r.head
			r.queued, r.head = false, false
			requeue = true
		default:
			r.queued = r.queued || requeued
		}
	}
	w.mu.Unlock()
	if deaf {
		w.resync(key)
	}
	switch head {
	case "":
		w.Freed(key)
	case w.line.id:
		// Our own place, stale: wake the next head, and take a place
		// behind it as ToLine asked, unless someone here still waits.
		w.line.next(key, requeue || r == nil, w.passed)
	}
}

// handoff is a wake-up from the key's line for this process: its next waiter
// tries, or, if nobody here waits for the key any more, the line's next head
// is woken instead, so a stale place in the line cannot strand the lock. An
// empty line (empty) wakes a waiter here, if any, and nobody else.
func (w *Waker[L]) handoff(key string, empty bool) {
	w.mu.Lock()
	r := w.keys[key]
	deaf := false
	if r != nil {
		deaf = r.head
		r.streak, r.queued, r.head = 0, false, false
		r.wake()
	}
	delete(w.placed, key) // the line reached it: nobody here holds it now
	w.contended[key] = time.Now()
	w.mu.Unlock()
	if deaf {
		w.resync(key)
	}
	if r == nil && !empty {
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
func (w *Waker[L]) queue(ctx context.Context, key string, r *Room[L], look bool) int64 {
	if w.line == nil {
		return noLine
	}
	w.mu.Lock()
	queued := r.queued
	w.mu.Unlock()
	if queued && !look {
		return 1
	}
	place := w.line.join(ctx, key)
	w.mu.Lock()
	was := r.listens()
	r.queued, r.head, r.unlined = place > 0, place == 1, place == noLine
	if place > 0 {
		w.contended[key] = time.Now()
	}
	now := r.listens()
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
