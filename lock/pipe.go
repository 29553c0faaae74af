package lock

import (
	"context"

	"flashsale/lock/internal/wire"
)

// piped is the transport beneath a Redlock instance, with the speed layer on
// or off (fast.go says why it stays on): every command for a node travels on the node's one pipelined
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
	p.n.pipe.Send(c.args, want, func(v any, inc string, err error) {
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
		reply(answer{n: n, inc: inc, err: err})
	})
}

// instances is how Redlock reaches its nodes.
func (r *redlock) instances() []instance { return r.pipes }

// stale drops the node's pipelined connection if it has not answered
// anything for a whole TTL (a paused node, a cut without a reset): commands
// queued behind a dead connection would otherwise wait for ever.
func (r *redlock) stale(n *node) { n.pipe.Stale(r.cfg.ttl) }
