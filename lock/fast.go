package lock

import (
	"context"
	"time"

	"flashsale/internal/randhex"
	"flashsale/lock/internal/fast"
)

// The speed layer (on unless Options.FastOff; Client.SetFast switches it)
// changes who tries next and when, never who holds: keyspace wake-ups and a
// turn among this process's waiters in place of the random delay, a waiting
// line per hot key across processes, a hand-over to the next waiter here in
// one atomic step, Redlock's ordered release, and an early busy answer
// (Locker.ExpectedWait). Every lease is still the rung's own acquire or its
// hand-over, which checks the holder's value and counts quorum, validity and
// token as an acquire does, so a lost or doubled wake-up costs time, never a
// second holder, and every rung breaks or holds under the same faults. Off,
// Acquire waits a random delay, Release is the rung's own, and nothing of the
// layer runs.

// releaseFast gives the lease back and lets the next waiter in: one here,
// or, for a variant whose waiters stand in line, the head of the key's
// line.
func (l *Lease) releaseFast(ctx context.Context) error {
	lk, key := l.locker, l.k.lock
	lk.wake.Unhold(key, l)
	if !lk.variant.OwnerChecked {
		// Wake a waiter here now; other processes get the keyspace event.
		err := lk.v.release(ctx, lk.steps(l.name, l), l.k, l.value)
		if err == nil {
			lk.wake.Deleted(key)
		}
		return err
	}
	valid := time.Now().Before(l.ValidUntil())
	next := func() { lk.wake.ToLine(key) }
	if room, direct := lk.wake.NextHere(key, lk); room != nil {
		if h, ok := lk.v.(handingOver); ok && direct && valid && l.handOver(ctx, h, room) {
			return nil
		}
		next = func() { lk.wake.Freed(key) }
	}
	if o, ok := lk.v.(orderedRelease); ok {
		return o.releaseThen(ctx, l.k, l.value, valid, next)
	}
	err := lk.v.release(ctx, lk.steps(l.name, l), l.k, l.value)
	if err == nil {
		next()
	}
	return err
}

// handingOver is a variant whose lease can pass from its holder straight to
// the next waiter here in one round trip, counted from when it was sent as
// an acquire is. Only owner-checked variants hand over: a broken release has
// no holder's value to check.
type handingOver interface {
	handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error)
}

// handOver passes the lease to the waiter whose turn it is in room, and
// reports whether it did. A lease that did not pass is still the releaser's
// to give back the usual way.
func (l *Lease) handOver(ctx context.Context, h handingOver, room *fast.Room[*Lease]) bool {
	lk := l.locker
	value := randhex.String(16)
	start := time.Now()
	g, err := h.handOver(ctx, l.k, l.value, value, lk.cfg.ttl)
	if err != nil {
		// A late answer may have passed it to nobody: undo that, then wake
		// the waiter whose turn it was, which nothing else will.
		lk.abandon(ctx, l.k, value, err, func() { lk.wake.Freed(l.k.lock) })
		return false
	}
	next := lk.newLease(l.name, l.k, value, g, start)
	lk.wake.Hold(l.k.lock, next)
	if !lk.wake.Give(room, lk, next) {
		// Every waiter here left while the lease was on its way.
		next.releaseLater(ctx)
	}
	return true
}

// The owner-checked rungs' hand-overs live here, not in their files: they
// never run with the speed layer off. Each is the rung's acquire with
// passLease in place of SET NX PX.
var (
	// passLease is a release's compare and the next acquire's SET in one
	// atomic step. KEYS[1] lock; ARGV[1] holder's value, ARGV[2] next
	// holder's value, ARGV[3] ttl ms. Returns 1 if passed, 0 if not the
	// holder's any more.
	passLease = newScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
redis.call("set", KEYS[1], ARGV[2], "PX", ARGV[3])
return 1`)

	// passLeaseFenced is passLease drawing the next holder's token, as
	// acquireFenced does. KEYS[2] fence counter. Returns the token, or 0.
	passLeaseFenced = newScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
redis.call("set", KEYS[1], ARGV[2], "PX", ARGV[3])
return redis.call("incr", KEYS[2])`)
)

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

func (r redlock) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	g, _, err := r.steps(ctx, noFaultPoints, k, to, ttl, passLease.vote([]string{k.lock}, from, to, ms(ttl)), need{yes: r.quorum})
	return g, err
}

func (r redlockFence) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	return r.fenced(ctx, noFaultPoints, k, to, ttl, passLeaseFenced.vote([]string{k.lock, k.fence}, from, to, ms(ttl)))
}

// orderedRelease is a variant whose commands reach each node in the order
// sent (Redlock's pipelined connections): the next waiter may go as soon as
// the deletes are queued, since its acquire cannot overtake them.
type orderedRelease interface {
	releaseThen(ctx context.Context, k keys, value string, valid bool, queued func()) error
}
