package node

import (
	"context"
	"errors"
	"time"

	"flashsale/lock/internal/wire"
)

// The vote transport: every command for a node travels on the node's one
// pipelined connection (internal/wire), appended to whatever other callers
// are sending, its reply handed back by the connection's reader. Asking
// five nodes costs five buffered writes and no goroutine; concurrent
// lockers share writes and reads; and one process's commands reach each
// node in the order they were sent, so the delete that undoes a failed try
// cannot overtake its SET. It changes how commands travel, never what they
// are. (A goroutine and a pooled go-redis connection per command per node
// could not answer within the per-node timeout under a flash sale's
// hundreds of waiters: every vote failed as "unavailable".)

// Command is one of the two kinds Redlock sends: SET NX PX, answered 1 if
// it set the key and 0 if the key was taken, or an EVAL of a Lua script,
// answered with the script's integer.
type Command struct {
	Args []string // as sent
	Set  bool     // SET NX PX: its OK or nil reads as 1 or 0
	// Grants: a yes to it can count toward a grant, so restart awareness's
	// marker check follows it (Node.kept). A compare-and-delete's
	// yes gives nobody a lock.
	Grants bool
}

// Answer is one node's reply to one command.
type Answer struct {
	N    int64  // 1 for a SET that set, else what the script returned
	Tag  string // the incarnation its connection met (connTag)
	Lost bool   // the node's data lost keys since its connection met them (Node.kept)
	Err  error  // no answer came
}

// Send sends c now and hands the node's answer to reply later, from
// another goroutine; reply must not block. A ctx that is done already
// sends nothing: reply gets its error at once.
func (n *Node) Send(ctx context.Context, c Command, reply func(Answer)) {
	if err := ctx.Err(); err != nil {
		reply(Answer{Err: err}) // the caller gave up: nothing to send
		return
	}
	want := wire.Integer
	if c.Set {
		want = wire.OKOrNil
	}
	if !n.cfg.RestartAware || !c.Grants {
		n.pipe.Send(c.Args, want, func(v any, tag string, err error) { reply(answer(c, v, tag, err)) })
		return
	}
	// Restart awareness's checks follow the vote in the same write
	// (Node.kept judges them): not part of any rung, and no extra round trip.
	// Votes written together share one set of checks behind the last.
	n.pipe.SendChecked(wire.Command{Args: c.Args, Want: want}, checks, func(v any, cs []any, tag string, err error) {
		a := answer(c, v, tag, err)
		a.Lost = err == nil && !n.kept(tag, cs[0], cs[1])
		reply(a)
	})
}

// answer reads a node's reply v to c.
func answer(c Command, v any, tag string, err error) Answer {
	var n int64
	switch {
	case err != nil:
	case c.Set:
		var set bool
		set, err = wire.OK(v)
		if set {
			n = 1
		}
	default:
		n, err = wire.Int(v)
	}
	return Answer{N: n, Tag: tag, Err: err}
}

// LateWindow is how long a node may be silent and still count as up but
// late: four per-node timeouts (at most a TTL). On a machine whose cores
// are all busy, a node's process or this one can go unscheduled for a few
// tens of milliseconds; a node silent for longer is down (paused, cut off),
// and its vote says unavailable again.
func LateWindow(timeout, ttl time.Duration) time.Duration { return min(4*timeout, ttl) }

// errNotCounted: the node answers, but restart awareness does not count its
// votes now (it sits out, or waits for its counters' re-seed).
var errNotCounted = errors.New("restarted, flushed or reset less than a TTL ago, or fencing counters not re-seeded yet: does not vote")

// Ready reports whether a vote of the node would count now: a command sent
// on the votes' connection as a vote is (restart awareness's checks behind
// it) is answered, the checks keep it, and the node's incarnation counts.
// It changes nothing on the node.
func (n *Node) Ready(ctx context.Context) error {
	got := make(chan Answer, 1)
	n.Send(ctx, Command{Args: []string{"EXISTS", n.cfg.Namespace + "ready"}, Grants: true}, func(a Answer) { got <- a })
	select {
	case a := <-got:
		switch {
		case a.Err != nil:
			return a.Err
		case a.Lost:
			return errDataLost
		case !n.Counts(a.Tag, time.Now()):
			return errNotCounted
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
