package lock

import (
	"context"
	"strconv"
	"time"

	"flashsale/lock/internal/wire"
)

// handingOver is a variant whose lease can pass from its holder straight to
// the next waiter of the same process: one atomic step per node that checks
// the holder's value and writes the waiter's (passLease), in place of a
// release and the acquire that would follow it. That is one round trip to
// the nodes where the release and the acquire take two, one after the
// other, and the next holder is in as soon as it returns.
//
// Why it is as safe as the release and acquire it replaces: on each node
// the key goes from the holder's value to the waiter's in one step, so
// nobody else can hold it in between; a node where the key is not the
// holder's any more passes nothing. The new lease counts its validity from
// the moment the hand-over was sent, in this process, exactly as an acquire
// counts from the moment its SETs were sent; Redlock's needs a quorum of
// nodes that passed it, as an acquire needs a quorum that granted it; and a
// fenced lease draws its token in the same step, so tokens keep growing.
// Only owner-checked variants hand over: a broken release has nothing to
// check the holder's value with.
type handingOver interface {
	handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error)
}

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

func (r *redlock) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	start := time.Now()
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	_, validity, err := r.take(ctx, noGap, k, to, start, ttl,
		ask{cmd: passLease.eval([]string{k.lock}, from, to, ms), want: wire.Integer, read: readFlag, decided: r.wins})
	if err != nil {
		return grant{}, err
	}
	return grant{validity: validity}, nil
}

func (r redlockFence) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	return r.fencedTake(ctx, noGap, k, to, ttl, passLeaseFenced.eval([]string{k.lock, k.fence}, from, to, ms))
}

// noGap is the fault hook of a hand-over, which runs in the releasing
// holder: the next holder meets the after-acquire fault point itself, once
// the lease reaches it (Locker.receive).
func noGap(context.Context, Point) error { return nil }

// handOver passes the lease to the waiter whose turn it is in kw, and reports
// whether it did. A lease that did not pass is still the releaser's to
// give back the usual way.
func (l *Lease) handOver(ctx context.Context, h handingOver, kw *keyWait) bool {
	lk := l.locker
	value := newValue()
	start := time.Now()
	g, err := h.handOver(ctx, l.k, l.value, value, lk.cfg.ttl)
	if err != nil {
		return false
	}
	next := lk.newLease(l.name, l.k, value, g, start)
	if !lk.wake.give(kw, next) {
		// Every waiter here left while the lease was on its way.
		next.releaseLater(ctx)
	}
	return true
}

// releaseLater gives back, off the caller's path and within a TTL, a lease
// nobody will use: one that ran out before its acquire returned, or one
// handed over to a waiter that is gone or of another variant.
func (l *Lease) releaseLater(ctx context.Context) {
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.locker.cfg.ttl)
		defer cancel()
		_ = l.Release(rctx)
	}()
}

// receive is the waiter's side of a hand-over: the lease is its own now,
// and the after-acquire fault point is where it would have been.
func (l *Locker) receive(ctx context.Context, lease *Lease, tries int) (*Lease, int, error) {
	if err := l.cfg.faults.gapFor(l, lease.name, lease)(ctx, AfterAcquireStep1); err != nil {
		return nil, tries, err
	}
	return lease, tries, nil
}
