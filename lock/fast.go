package lock

import (
	"context"
	"time"

	"flashsale/internal/fault"
	"flashsale/lock/internal/fast"
	"flashsale/lock/internal/node"
)

// Speed layer.
//
// While it is on (Lockers.SetFast, Options.FastOff; on by default), a Locker waits
// and releases through package fast, which adds: keyspace wake-ups in place
// of the random delay, the waiters of one process taking turns; a waiting
// line per hot key across processes, so that a release wakes one process,
// not every one; a hand-over that passes a lease to the next waiter of the
// same process in one atomic step, the rung's own (below); Redlock's ordered
// release, which lets that waiter try as soon as the deletes are queued; and
// an early busy answer (ExpectedWait). Off, Acquire is retry, Release is the
// rung's own, ExpectedWait is zero, and nothing of the layer listens or runs.
//
// It decides who tries next and when; it never grants. Every lease is the
// rung's own acquire, or the rung's hand-over, which checks the holder's
// value and writes the next holder's in one atomic step on each node and
// counts Redlock's quorum, validity and fencing token as an acquire does.
// So a lost, stale or doubled wake-up costs time, never a second holder, and
// every rung breaks or holds under the same faults either way: the broken
// rungs keep their own releases and never hand over. docs/design.md ("The
// speed layer") gives the reasoning.

// waker is the speed layer of one set of lockers.
type waker = fast.Waker[*Lease]

// newWaker is the speed layer over the lockers' nodes, first node first.
func newWaker(cfg *config, nodes []*node.Node) *waker {
	fn := make([]fast.Node, len(nodes))
	for i, n := range nodes {
		fn[i] = n
	}
	fc := fast.Config{TTL: cfg.ttl, Timeout: cfg.nodeTimeout, Late: cfg.lateWindow(), Namespace: cfg.namespace,
		Lines: cfg.notifications, BackoffMin: cfg.backoffMin, BackoffMax: cfg.backoffMax}
	return fast.New(fc, fn, (*Lease).ValidUntil, func(ctx context.Context, l *Lease) { l.releaseLater(ctx) })
}

// lined reports whether the variant's waiters stand in a key's line across
// processes: the owner-checked variants, whose keys only a release by the
// holder or the TTL can free, so a release that wakes the line's head wakes
// the one waiter that should try.
func (l *Locker) lined() bool { return l.rung.OwnerChecked }

// acquireFast waits for the lock as waitLoop does, between tries waiting
// its turn among this process's waiters and dozing until the key is likely
// free.
func (l *Locker) acquireFast(ctx context.Context, name string) (*Lease, int, error) {
	w := l.wake.Wait(l.keysFor(name).lock, l, l.lined())
	defer w.Close()
	return l.waitLoop(ctx, name, w)
}

// releaseFast gives the lease back and lets the next waiter in: one here,
// or, for a variant whose waiters stand in line, the head of the key's
// line.
func (l *Lease) releaseFast(ctx context.Context) error {
	lk, key := l.locker, l.k.lock
	lk.wake.Unhold(key, l)
	if !lk.lined() {
		// Wake this process's next waiter now rather than after the
		// keyspace event's round trip; other processes still get the event.
		err := lk.v.release(ctx, lk.faultPointsFor(l.name, l), l.k, l.value)
		if err == nil {
			lk.wake.Deleted(key)
		}
		return err
	}
	valid := time.Now().Before(l.ValidUntil())
	next := func() { lk.wake.ToLine(key) }
	if room, direct := lk.wake.NextHere(key, lk); room != nil {
		// A waiter here is next: the lease passes to it in one step, else
		// it tries once the release is on its way.
		if h, ok := lk.v.(handingOver); ok && direct && valid && l.handOver(ctx, h, room) {
			return nil
		}
		next = func() { lk.wake.Freed(key) }
	}
	if o, ok := lk.v.(orderedRelease); ok {
		// Redlock: its commands reach each node in order, so the next
		// waiter may go as soon as the release is on its way: its acquire
		// cannot overtake it.
		return o.releaseThen(ctx, l.k, l.value, valid, next)
	}
	err := lk.v.release(ctx, lk.faultPointsFor(l.name, l), l.k, l.value)
	if err == nil {
		next()
	}
	return err
}

// handingOver is a variant whose lease can pass from its holder straight to
// the next waiter of the same process (passLease, below): one round trip
// where the release and the acquire it replaces take two. The new lease
// counts its validity from when the hand-over was sent, as an acquire
// counts from when its SETs were. Only owner-checked variants hand over: a
// broken release has nothing to check the holder's value with.
type handingOver interface {
	handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error)
}

// handOver passes the lease to the waiter whose turn it is in room, and
// reports whether it did. A lease that did not pass is still the releaser's
// to give back the usual way.
func (l *Lease) handOver(ctx context.Context, h handingOver, room *fast.Room[*Lease]) bool {
	lk := l.locker
	value := newValue()
	start := time.Now()
	g, err := h.handOver(ctx, l.k, l.value, value, lk.cfg.ttl)
	if err != nil {
		// Not passed, as far as we know; but a script whose answer came
		// late may have passed it to nobody: undo that too, then wake the
		// waiter whose turn it was. Nothing else will: its release, if it
		// is still to come, finds the key not the releaser's, and the
		// waiter may be dozing until the releaser's lease runs out.
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

// Each owner-checked rung's half of a hand-over lives here, not in the
// rung's file, because it never runs with the speed layer off: a rung file
// holds only what the rung does as taught. Each is the rung's own acquire
// with passLease in place of SET NX PX, and counts its lease as that
// acquire does.

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

// handOver is lua's: one script on the node, the lease valid for
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

// handOver is lua+fence's: lua's, drawing the next holder's
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

// handOver is redlock's: the key passes on every node, and the
// new lease needs a quorum and counts its validity exactly as an acquire,
// from when the scripts were sent.
func (r *redlock) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	start := time.Now()
	votes := r.ask(ctx, passLease.vote([]string{k.lock}, from, to, ms(ttl)), r.majority())
	g, err := r.lease("acquire", k, votes, start, ttl)
	if err != nil {
		r.unlock(k, to)
	}
	return g, err
}

// handOver is redlock+fence's: redlock's, drawing the
// next holder's token and writing it back as its acquire does.
func (r redlockFence) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	return r.fenced(ctx, noFaultPoints, k, to, ttl, passLeaseFenced.vote([]string{k.lock, k.fence}, from, to, ms(ttl)))
}

// handedOver is a lease handed over to a waiter, as the waiter returns it:
// its own now, with the after-acquire fault point where it would have been.
func (l *Locker) handedOver(ctx context.Context, lease *Lease, tries int) (*Lease, int, error) {
	if err := l.faultPointsFor(lease.name, lease)(ctx, fault.AfterAcquireStep1); err != nil {
		return nil, tries, err
	}
	return lease, tries, nil
}

// orderedRelease is a variant whose commands reach every node in the order
// this process sent them (redlock, over the pipelined connections): its
// release can let the next waiter go as soon as the deletes are queued.
type orderedRelease interface {
	releaseThen(ctx context.Context, k keys, value string, valid bool, queued func()) error
}

// releaseThen is redlock's release as the speed layer sends
// it: the same compare-and-delete on every node, with queued (if set)
// called as soon as every delete is on its node's pipelined connection. An
// acquire sent from this process after that reaches each node behind our
// delete, so the next waiter here may go at once.
//
// Inside its validity a lease is held by a quorum (that is what the
// validity means), so one node that deleted our value confirms the release;
// past its validity only a quorum of deletes does. The other deletes are
// sent all the same.
func (r *redlock) releaseThen(ctx context.Context, k keys, value string, valid bool, queued func()) error {
	u, need := r.majority(), r.quorum()
	if valid {
		u, need = quorumRule{yes: 1}, 1
	}
	// send has queued a command on every node's connection when it returns
	// (none where ctx was done already: the next waiter's try then finds
	// the key still held, a try lost, never a second holder).
	replies := r.send(ctx, compareAndDelete.call([]string{k.lock}, value))
	if queued != nil {
		queued()
	}
	if qe := r.tally("release", k, r.gather(ctx, replies, u)); len(qe.Granted) < need {
		return qe
	}
	return nil
}
