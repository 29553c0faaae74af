package lock

import (
	"context"
	"time"

	"flashsale/internal/fault"
)

// LuaFence is the name of the single-node lock with fencing tokens.
const LuaFence = "lua+fence"

// luaFence is lua with fencing tokens, the usual answer to a
// holder paused past its TTL: the Lua step that sets the lock also
// draws the next token from a counter on the node, in one atomic step, so
// every grant carries a token larger than any before it. The store registers
// the token on the row before it reads and writes only while the row still
// carries it; a paused holder's stale write meets a newer token and is
// refused. Release and extend are lua's.
//
// Where it still depends on the node: a node restarted without its data
// starts the counter again. The store then refuses the lower tokens — sales
// stop (unavailable) until the counter passes the old value, never unsafe.
type luaFence struct{ luaLock }

// acquireFenced takes the lock and, in the same atomic step, draws the
// next fencing token from this key's counter. KEYS[1] lock, KEYS[2] fence
// counter; ARGV[1] owner value, ARGV[2] ttl ms. Returns the token, or 0 if
// the lock is held.
var acquireFenced = newScript(`
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return redis.call("incr", KEYS[2])
end
return 0`)

func (v luaFence) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	token, err := acquireFenced.Run(ctx, v.rdb, []string{k.lock, k.fence}, value, ttl.Milliseconds()).Uint64()
	if err != nil {
		return grant{}, down(v.rdb, err)
	}
	if token == 0 {
		return grant{}, ErrNotAcquired
	}
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return grant{}, err
	}
	return grant{validity: ttl, token: token}, nil
}
