package lock

import (
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts of the correct variants. Redis runs a script atomically, so
// a check and the action it guards cannot be separated by an expiry or by
// another client — which is exactly the gap the broken variants leave open.
var (
	// compareAndDelete deletes the lock only if it still carries our value.
	// KEYS[1] lock; ARGV[1] owner value. Returns 1 if deleted.
	compareAndDelete = newScript(`
if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("del", KEYS[1])
end
return 0`)

	// compareAndPexpire renews the lock only if it still carries our value.
	// KEYS[1] lock; ARGV[1] owner value, ARGV[2] ttl in ms. Returns 1 if renewed.
	compareAndPexpire = newScript(`
if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0`)

	// acquireFenced takes the lock and, in the same atomic step, draws the
	// next fencing token from this key's counter.
	// KEYS[1] lock, KEYS[2] fence counter; ARGV[1] owner value, ARGV[2] ttl ms.
	// Returns the token, or 0 if the lock is held.
	acquireFenced = newScript(`
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return redis.call("incr", KEYS[2])
end
return 0`)

	// raiseFence writes a chosen token back as max(counter, token), but only on
	// a node where our lease still stands: a later grant on that node then
	// draws a larger token. KEYS[1] lock, KEYS[2] fence counter; ARGV[1] owner
	// value, ARGV[2] token. Returns 1 if the lease stands there.
	raiseFence = newScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
if tonumber(redis.call("get", KEYS[2]) or "0") < tonumber(ARGV[2]) then
	redis.call("set", KEYS[2], ARGV[2])
end
return 1`)

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

// The waiting line of a hot key across processes (fast_line.go). It lives on the
// first node; it orders wake-ups, never grants: every grant is still the
// variant's own acquire.
var (
	// joinLine puts a waiting process at the back of a key's line, unless it
	// stands in it already, but only while the lock key is there: a release
	// that comes later then wakes the line's head. If the key is gone
	// already the caller should try at once. KEYS[1] lock, KEYS[2] line;
	// ARGV[1] process id, ARGV[2] line TTL ms. Returns the caller's place in
	// the line (1: the head), or 0 if the lock key is gone.
	joinLine = newScript(`
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
return place`)

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
	wakeHead = newScript(`
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
return head`)
)
