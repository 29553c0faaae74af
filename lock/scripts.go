package lock

import (
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts of the machinery, which no rung teaches: restart awareness
// (restart.go) runs them on every node whatever the rung. A rung's own
// script lives in the rung's file, beside the code that runs it, so the
// side-by-side of two rungs shows it (compareAndDelete and
// compareAndPexpire in lua.go, acquireFenced in lua_fence.go, raiseFence in
// redlock_fence.go); the speed layer's live with its code (fast.go,
// internal/fast/line.go). Redis runs a script atomically, so a check and
// the action it guards cannot be separated by an expiry or by another
// client.
var (
	// recordTTL records a client's lease TTL on a node as max(record, ttl),
	// so that a restarted node sits out the largest TTL any client uses
	// (restart.go). KEYS[1] the record; ARGV[1] ttl ms. Returns the record.
	recordTTL = newScript(`
local cur = tonumber(redis.call("get", KEYS[1]) or "0")
if cur < tonumber(ARGV[1]) then
	redis.call("set", KEYS[1], ARGV[1])
	return tonumber(ARGV[1])
end
return cur`)

	// reseedCounters raises a node's fencing counters to at least the values
	// read from the other nodes and marks the node seeded for its
	// incarnation, in one atomic step (one script: an ACL user need not be
	// allowed MULTI). KEYS[1..n-1] fence counters, KEYS[n] the seeded marker;
	// ARGV[1..n-1] the values, ARGV[n] the node's run_id.
	reseedCounters = newScript(`
for i = 1, #KEYS - 1 do
	if tonumber(redis.call("get", KEYS[i]) or "0") < tonumber(ARGV[i]) then
		redis.call("set", KEYS[i], ARGV[i])
	end
end
redis.call("set", KEYS[#KEYS], ARGV[#KEYS])
return 1`)
)

// script is a Lua script: go-redis's handle for the single-node variants,
// and its source for the Redlock votes, which travel on the node pipes.
type script struct {
	*redis.Script
	src string
}

func newScript(src string) script { return script{redis.NewScript(src), src} }

// eval is the command that runs the script on a node pipe. EVAL rather than
// EVALSHA: Redis caches the compiled script by its hash either way, and a
// node that restarted or flushed its script cache needs no second trip.
func (s script) eval(keys []string, args ...string) []string {
	cmd := make([]string, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVAL", s.src, strconv.Itoa(len(keys)))
	cmd = append(cmd, keys...)
	return append(cmd, args...)
}

// ms is a duration as the milliseconds of a PX or PEXPIRE argument.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
