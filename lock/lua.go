package lock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
)

// Lua is the single-node lock's name: SET NX PX, released by a Lua
// compare-and-delete.
const Lua = "lua"

// luaLock is the correct single-node lock that the articles end with:
// SET k <128-bit random> NX PX ttl to acquire, a Lua compare-and-delete to
// release and a Lua compare-and-pexpire to extend, so no check can be
// separated from its action.
//
// Where it still breaks: a holder that pauses inside its critical section
// past the TTL (GC, swap, SIGSTOP) wakes up believing it holds the lock while
// a successor does too. Only fencing tokens checked by the store make that
// safe (luaFence). And one node is one point of failure.
type luaLock struct{ rdb *redis.Client }

func (v luaLock) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	// Spelled out: go-redis's SetNX would send EX instead of PX for a TTL
	// of whole seconds, and the command seen in MONITOR would not be this.
	err := v.rdb.Do(ctx, "set", k.lock, value, "nx", "px", ms(ttl)).Err() // SET k value NX PX ttl
	if errors.Is(err, redis.Nil) {
		return grant{}, ErrNotAcquired // NX: the key exists, someone holds the lock
	}
	if err != nil {
		return grant{}, down(v.rdb, err)
	}
	// One command made the key and its TTL: a crash here leaves a lock
	// that still expires.
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return grant{}, err
	}
	return grant{validity: ttl}, nil
}

// compareAndDelete deletes the lock only if it still carries our value, in
// one atomic step. KEYS[1] lock; ARGV[1] owner value. Returns 1 if deleted.
var compareAndDelete = newScript(`
if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("del", KEYS[1])
end
return 0`)

func (v luaLock) release(ctx context.Context, _ faultPoints, k keys, value string) error {
	n, err := compareAndDelete.Run(ctx, v.rdb, []string{k.lock}, value).Int()
	if err != nil {
		return down(v.rdb, err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}

// compareAndPexpire renews the lock only if it still carries our value, in
// one atomic step. KEYS[1] lock; ARGV[1] owner value, ARGV[2] ttl in ms.
// Returns 1 if renewed.
var compareAndPexpire = newScript(`
if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0`)

func (v luaLock) extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error) {
	n, err := compareAndPexpire.Run(ctx, v.rdb, []string{k.lock}, value, ttl.Milliseconds()).Int()
	if err != nil {
		return 0, down(v.rdb, err)
	}
	if n == 0 {
		return 0, ErrNotHeld
	}
	return ttl, nil
}
