package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"flashsale/lock/internal/wire"
)

// line is the waiting line of a hot key across processes. Waking every
// waiting process at each release makes them all try at once: Redlock's SETs
// then reach the nodes in different orders, the votes split, and nobody
// reaches a quorum; on one node, all but one try fail, and each failed try
// costs CPU the holder needs. So a process that has to wait for a key of an
// owner-checked variant (lua, redlock and their fenced rungs) joins the key's
// line, a list on the first node, and a release wakes only the line's head,
// with a message on that process's own channel. Processes are served in the
// order they joined; within a process, waiters take turns (wait.go), and a
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
	timeout time.Duration
	first   *wire.Pipe
}

func newLine(cfg *config, first *node) *line {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	prefix := cfg.namespace + "wake:"
	return &line{id: id, channel: prefix + id, prefix: prefix, ns: cfg.namespace, ttl: cfg.ttl, timeout: cfg.nodeTimeout, first: first.pipe}
}

// of is the line of a lock key ("<ns>lock:<name>" → "<ns>line:<name>").
func (q *line) of(lockKey string) string {
	return q.ns + "line:" + lockKey[len(q.ns+"lock:"):]
}

// noLine is join's answer when the line could not be asked.
const noLine = -1

// join puts this process at the back of the key's line and returns its
// place, 1 for the head. 0 means it did not join because the lock key is
// gone from the first node: try again now. noLine means the node did not
// answer: fall back to the backoff.
func (q *line) join(ctx context.Context, lockKey string) int64 {
	done := make(chan int64, 1)
	cmd := joinLine.eval([]string{lockKey, q.of(lockKey)}, q.id, strconv.FormatInt(q.ttl.Milliseconds(), 10))
	q.first.Send(cmd, wire.Integer, func(v any, err error) {
		n, err2 := wire.Int(v)
		if err != nil || err2 != nil {
			n = noLine
		}
		done <- n
	})
	t := time.NewTimer(q.timeout)
	defer t.Stop()
	select {
	case place := <-done:
		return place
	case <-t.C:
		return noLine
	case <-ctx.Done():
		return noLine
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
	q.first.Send(cmd, wire.Bulk, func(v any, err error) {
		head, _ := v.(string)
		if err != nil {
			head = ""
		}
		done(lockKey, head, requeue && head != "" && head != q.id)
	})
}
