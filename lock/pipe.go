package lock

import (
	"context"
	"fmt"
	"time"

	"flashsale/lock/internal/wire"
)

// piped is the transport beneath a Redlock instance, with the speed layer on
// or off: every command for a node travels on the node's one pipelined
// connection (internal/wire), appended to whatever other callers are
// sending, its reply handed back by the connection's reader. Asking five
// nodes costs five buffered writes and no goroutine; concurrent lockers
// share writes and reads; and one process's commands reach each node in the
// order they were sent, so the delete that undoes a failed try cannot
// overtake its SET. It changes how commands travel, never what they are:
// the same SET NX PX and the same scripts. (A goroutine and a pooled
// go-redis connection per command per node, tried as the plain transport,
// could not answer within the per-node timeout under a flash sale's
// hundreds of waiters: every vote failed as "unavailable".)
type piped struct{ n *node }

func (p piped) send(ctx context.Context, c command, reply func(answer)) {
	if err := ctx.Err(); err != nil {
		reply(answer{err: err}) // the caller gave up: nothing to send
		return
	}
	want := wire.Integer
	if c.set {
		want = wire.OKOrNil
	}
	if !p.n.checks(c) {
		p.n.pipe.Send(c.args, want, func(v any, inc string, err error) { reply(p.answer(c, v, inc, err)) })
		return
	}
	// Restart awareness's check follows the vote in the same write
	// (restart_check.go): not part of any rung, and no extra round trip.
	p.n.pipe.SendAll([]wire.Command{{Args: c.args, Want: want}, markerCheck}, func(vs []any, inc string, err error) {
		a := p.answer(c, vs[0], inc, err)
		a.lost = err == nil && !p.n.kept(inc, vs[1])
		reply(a)
	})
}

// answer reads a node's reply v to c.
func (p piped) answer(c command, v any, inc string, err error) answer {
	var n int64
	switch {
	case err != nil:
	case c.set:
		var set bool
		set, err = wire.OK(v)
		n = one(set)
	default:
		n, err = wire.Int(v)
	}
	return answer{n: n, inc: inc, err: err}
}

// instances is how Redlock reaches its nodes.
func (r *redlock) instances() []instance { return r.pipes }

// stale judges a node whose vote was given up on in a round that began at
// start (err says why): if it was answering then (below), the node is up
// and only late (gather waited for it until lateWindow, quorum.go):
// ErrNodeLate, which makes the outcome busy, not unavailable. A process too
// busy to read its replies, or even to send its commands, in time must not
// call live nodes down. Otherwise the node failed; its connection is
// dropped if it has not answered anything for a whole TTL (a paused node,
// a cut without a reset), since commands queued behind a dead connection
// would otherwise wait for ever.
func (r *redlock) stale(n *node, start time.Time, err error) error {
	if r.answering(n, start) {
		return fmt.Errorf("%w: %w", ErrNodeLate, err)
	}
	n.pipe.Stale(r.cfg.ttl)
	return err
}

// answering reports whether n counted as up for a round that began at
// start, though its answer is not read yet: its connection had bytes
// arrive within lateWindow before the round or since, or has some
// waiting, or owes no reply to anything written to it (the vote is not
// written yet: this process is slow). A connection that owes replies and
// has had nothing arrive for lateWindow is down, however recently its
// commands were written: that is a frozen node.
func (r *redlock) answering(n *node, start time.Time) bool {
	return n.pipe.Answering(start.Add(-lateWindow(r.cfg)))
}

// lateWindow is how long a node may be silent and still count as up but
// late: four per-node timeouts (at most a TTL). On a machine whose cores
// are all busy, a node's process or this one can go unscheduled for a few
// tens of milliseconds; a node silent for longer is down (paused, cut off),
// and its vote says unavailable again.
func lateWindow(cfg *config) time.Duration { return min(4*cfg.nodeTimeout, cfg.ttl) }
