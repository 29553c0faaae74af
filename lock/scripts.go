package lock

import (
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/node"
	"flashsale/lock/internal/wire"
)

// A rung's script lives in the rung's file, so two rungs side by side show
// it. Redis runs a script atomically: no expiry or other client can come
// between a check and the action it guards.

// script is a Lua script: go-redis's handle for the single-node variants,
// and its source for the Redlock votes, which travel on the node pipes.
type script struct {
	*redis.Script
	src string
}

func newScript(src string) script { return script{redis.NewScript(src), src} }

// eval is the command that runs the script on a node pipe (wire.Eval).
func (s script) eval(keys []string, args ...string) []string { return wire.Eval(s.src, keys, args...) }

// vote runs the script as a Redlock vote whose yes can count toward a grant.
func (s script) vote(keys []string, args ...string) node.Command {
	return node.Command{Args: s.eval(keys, args...), Grants: true}
}

// call runs the script on a node where its yes gives nobody a lock.
func (s script) call(keys []string, args ...string) node.Command {
	return node.Command{Args: s.eval(keys, args...)}
}

// ms is a duration as the milliseconds of a PX or PEXPIRE argument.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
