package lock

import (
	"context"
	"time"
)

// instance is one Redis master as Redlock (redlock.go) talks to it: send
// sends a command now and hands the node's answer to reply later, from
// another goroutine; reply must not block. A ctx that is done already sends
// nothing: reply gets its error at once. Its one implementation is the
// node's pipelined connection (pipe.go).
type instance interface {
	send(ctx context.Context, c command, reply func(answer))
}

// command is one of the two kinds Redlock sends: SET NX PX, answered 1 if
// it set the key and 0 if the key was taken, or an EVAL of a Lua script,
// answered with the script's integer.
type command struct {
	args []string // as sent
	set  bool
}

// setNX is SET key value NX PX ttl.
func setNX(key, value string, ttl time.Duration) command {
	return command{args: []string{"SET", key, value, "NX", "PX", ms(ttl)}, set: true}
}

// call is an EVAL of the script with keys and args.
func (s script) call(keys []string, args ...string) command {
	return command{args: s.eval(keys, args...)}
}

// answer is one node's reply to one command.
type answer struct {
	n    int64  // 1 for a SET that set, else what the script returned
	inc  string // the incarnation its connection met (connTag), if the transport can tell
	lost bool   // the node's data lost keys since its connection met them (restart_check.go)
	err  error  // no answer came
}
