package lock

import (
	"context"
	"time"
)

// This file is part of the speed layer (fast.go): each owner-checked rung's
// half of a hand-over (fast_handover.go says when one happens and why it is
// as safe as the release and acquire it replaces). It lives here, not in
// the rung files, because it never runs with the speed layer off: a rung
// file holds only what the rung does as taught. Each hand-over is the rung's
// own acquire with passLease in place of SET NX PX, and counts its lease as
// that acquire does.

// The hand-over scripts: the compare of a release and the SET of the next
// acquire in one atomic step on a node.
var (
	// passLease hands the lock from its holder straight to the next holder:
	// the compare-and-delete of a release and the SET NX of the acquire
	// that would follow it, with no moment between them in which a third
	// client could take the key. KEYS[1] lock; ARGV[1] the holder's value,
	// ARGV[2] the next holder's value, ARGV[3] ttl ms. Returns 1 if the lock
	// passed, 0 if it was not the holder's any more.
	passLease = newScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
redis.call("set", KEYS[1], ARGV[2], "PX", ARGV[3])
return 1`)

	// passLeaseFenced is passLease for the fenced rungs: the next holder's
	// token is drawn in the same step, as acquireFenced draws it.
	// KEYS[1] lock, KEYS[2] fence counter; ARGV as passLease. Returns the
	// token, or 0 if the lock was not the holder's any more.
	passLeaseFenced = newScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
redis.call("set", KEYS[1], ARGV[2], "PX", ARGV[3])
return redis.call("incr", KEYS[2])`)
)

// handOver is lua's (lua.go): one script on the node, the lease valid for
// the TTL from when it was sent, as lua's acquire counts it.
func (v luaLock) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	n, err := passLease.Run(ctx, v.rdb, []string{k.lock}, from, to, ttl.Milliseconds()).Int()
	if err != nil {
		return grant{}, down(v.rdb, err)
	}
	if n == 0 {
		return grant{}, ErrNotHeld
	}
	return grant{validity: ttl}, nil
}

// handOver is lua+fence's (lua_fence.go): lua's, drawing the next holder's
// token in the same step, as its acquire draws it.
func (v luaFence) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	token, err := passLeaseFenced.Run(ctx, v.rdb, []string{k.lock, k.fence}, from, to, ttl.Milliseconds()).Uint64()
	if err != nil {
		return grant{}, down(v.rdb, err)
	}
	if token == 0 {
		return grant{}, ErrNotHeld
	}
	return grant{validity: ttl, token: token}, nil
}

// handOver is redlock's (redlock.go): the key passes on every node, and the
// new lease needs a quorum and counts its validity exactly as an acquire,
// from when the scripts were sent.
func (r *redlock) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	start := time.Now()
	votes := r.ask(ctx, passLease.call([]string{k.lock}, from, to, ms(ttl)), r.majority())
	g, err := r.lease("acquire", k, votes, start, ttl)
	if err != nil {
		r.unlock(k, to)
	}
	return g, err
}

// handOver is redlock+fence's (redlock_fence.go): redlock's, drawing the
// next holder's token and writing it back as its acquire does.
func (r redlockFence) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	return r.fenced(ctx, noGap, k, to, ttl, passLeaseFenced.call([]string{k.lock, k.fence}, from, to, ms(ttl)))
}
