package node

import "github.com/redis/go-redis/v9"

// The scripts of restart awareness, which no rung teaches: they run on
// every node whatever the rung. Redis runs a script atomically, so a check
// and the write it guards cannot be separated by another client.

// RaiseToMax is the source of a script that sets KEYS[1] to max(its value,
// ARGV[1]) and returns the result: a number that only grows (the record of
// the largest TTL, a fencing counter) can be raised by anyone, never
// lowered, so it needs no lease.
const RaiseToMax = `
local n = tonumber(redis.call("get", KEYS[1]) or "0")
if n < tonumber(ARGV[1]) then
	redis.call("set", KEYS[1], ARGV[1])
	return tonumber(ARGV[1])
end
return n`

var (
	// recordTTL records a client's lease TTL on a node as max(record, ttl),
	// so that a restarted node sits out the largest TTL any client uses.
	// KEYS[1] the record; ARGV[1] ttl ms. Returns the record. It travels in
	// the meeting, as an EVAL of this source.
	recordTTL = RaiseToMax

	// reseedCounters raises a node's fencing counters to at least the values
	// read from the other nodes and marks the node seeded for its data, in
	// one atomic step (one script: an ACL user need not be allowed MULTI).
	// KEYS[1..n-1] fence counters, KEYS[n] the seeded marker; ARGV[1..n-1]
	// the values, ARGV[n] the data's name (seededFor).
	reseedCounters = redis.NewScript(`
for i = 1, #KEYS - 1 do
	if tonumber(redis.call("get", KEYS[i]) or "0") < tonumber(ARGV[i]) then
		redis.call("set", KEYS[i], ARGV[i])
	end
end
redis.call("set", KEYS[#KEYS], ARGV[#KEYS])
return 1`)
)
