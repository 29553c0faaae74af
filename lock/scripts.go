package lock

import (
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/node"
	"flashsale/lock/internal/wire"
)

// A rung's own script lives in the rung's file, beside the code that runs
// it, so the side-by-side of two rungs shows it (compareAndDelete and
// compareAndPexpire with luaLock, acquireFenced with luaFence, raiseFence
// with redlockFence); the speed layer's live with it, and restart
// awareness's in internal/node. Redis runs a script atomically, so a check
// and the action it guards cannot be separated by an expiry or by another
// client.

// script is a Lua script: go-redis's handle for the single-node variants,
// and its source for the Redlock votes, which travel on the node pipes.
type script struct {
	*redis.Script
	src string
}

func newScript(src string) script { return script{redis.NewScript(src), src} }

// eval is the command that runs the script on a node pipe (wire.Eval).
func (s script) eval(keys []string, args ...string) []string { return wire.Eval(s.src, keys, args...) }

// vote is a Redlock vote that runs the script with keys and args: its yes
// can count toward a grant (an acquire, an extend, a hand-over).
func (s script) vote(keys []string, args ...string) node.Command {
	return node.Command{Args: s.eval(keys, args...), Grants: true}
}

// call runs the script with keys and args on a node, where its yes gives
// nobody a lock (a release's compare-and-delete, a fence's write-back).
func (s script) call(keys []string, args ...string) node.Command {
	return node.Command{Args: s.eval(keys, args...)}
}

// setNX is the Redlock vote SET key value NX PX ttl.
func setNX(key, value string, ttl time.Duration) node.Command {
	return node.Command{Args: []string{"SET", key, value, "NX", "PX", ms(ttl)}, Set: true, Grants: true}
}

// ms is a duration as the milliseconds of a PX or PEXPIRE argument.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
