// Package lock provides per-key Redis locks in every variant of the teaching
// ladder: the broken ones the articles warn about and the correct ones, all
// behind one Locker type so a caller can switch between them at run time.
//
// The package has two layers. The ladder is what is taught: a variant is a
// small value that takes, gives back and extends one lease on Redis, one
// type each, listed once on the ladder (Ladder: none, setnx-expire, get-del,
// plain-del, lua, redlock, lua-check, lua+fence, redlock+fence, the
// article's Redlock, redsync, the attendee's rung). Under it is the plain
// machinery every rung needs: the lease and its release, waiting for a
// busy lock as the Redis distlock page describes it (Locker.retry), the
// fault points, the watchdog, the check before a write (Lease.CheckBeforeWrite),
// restart awareness (internal/node), errors. Two variants differ only in the
// lines that make one of them wrong.
//
// Beside the ladder is the speed layer, its seam here (waker) and the rest in
// internal/fast: a waiting line per hot key across processes, keyspace
// wake-ups, a hand-over to the next waiter of the same process, an ordered
// release for Redlock, an early busy answer. It decides who tries next and
// when; it never grants. Switched off (Options.FastOff, Lockers.SetFast), what runs
// is exactly the ladder and the machinery, and Redlock's pipelined
// connections (internal/node), which stay on either way.
package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
	"flashsale/internal/randhex"
	layout "flashsale/lock/internal/keys"
)

// keys are the Redis keys one lock name maps to.
type keys struct {
	lock  string // the lock itself
	fence string // the fencing counter of this lock
}

// grant is what one successful acquire attempt of a variant yields.
type grant struct {
	// validity is how long the lease is safe to use, counted from the
	// moment the attempt's first command was sent (Locker.try's start),
	// for every rung: the TTL for one node, TTL − drift for Redlock.
	validity time.Duration
	token    uint64 // fencing token; meaningful only when fenced
}

// faultPoints is called at each point between two steps of a variant's
// operation; it returns fault.ErrCrashed when the operation must end there.
type faultPoints func(ctx context.Context, p fault.Point) error

// noFaultPoints is the faultPoints of an operation no fault reaches: the undo of an
// abandoned try (Locker.abandon), and a hand-over, which runs in the releasing
// holder while the next holder meets the after-acquire fault point itself,
// once the lease reaches it (Locker.handedOver).
func noFaultPoints(context.Context, fault.Point) error { return nil }

// variant is one rung of the ladder: a way to take, give back and extend a
// lease with a given owner value. Implementations make exactly the Redis calls
// the pattern they teach makes, with a fault point wherever that pattern has two steps.
type variant interface {
	acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error)
	release(ctx context.Context, checkpoint faultPoints, k keys, value string) error
	extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error)
}

// Locker hands out leases on named keys with one variant.
type Locker struct {
	rung Rung // the rung's name and traits, as the ladder declares them
	v    variant
	cfg  *config
	wake *waker
	// reach checks that the nodes this variant needs answer now: none for
	// none, the first node for the single-node variants, a quorum for Redlock.
	reach func(ctx context.Context) error
}

// Name is the variant's name, as in Names.
func (l *Locker) Name() string { return l.rung.Name }

// Fenced reports whether leases carry fencing tokens the store must check.
func (l *Locker) Fenced() bool { return l.rung.Fenced }

// TTL is the lease time to live this locker asks for.
func (l *Locker) TTL() time.Duration { return l.cfg.ttl }

func (l *Locker) keysFor(name string) keys {
	return keys{lock: layout.Lock(l.cfg.namespace, name), fence: layout.Fence(l.cfg.namespace, name)}
}

// TryAcquire makes exactly one attempt. It fails with ErrNotAcquired when the
// lock is held, ErrUnavailable when too few nodes answered, or fault.ErrCrashed.
func (l *Locker) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	start := time.Now()
	lease, err := l.try(ctx, name)
	l.observe(locktap.Event{Kind: outcome(err), Variant: l.rung.Name, Key: name, Tries: 1, Wait: time.Since(start), Err: err}, lease)
	return lease, err
}

func (l *Locker) try(ctx context.Context, name string) (*Lease, error) {
	k := l.keysFor(name)
	value := newValue()
	start := time.Now()
	g, err := l.v.acquire(ctx, l.faultPointsFor(name, nil), k, value, l.cfg.ttl)
	if err != nil {
		l.abandon(ctx, k, value, err, nil) // the SET may have landed all the same
		return nil, err
	}
	return l.newLease(name, k, value, g, start), nil
}

// newLease is the lease of a grant whose first command was sent at start.
func (l *Locker) newLease(name string, k keys, value string, g grant, start time.Time) *Lease {
	lease := &Lease{
		locker: l, name: name, k: k, value: value,
		token: g.token, validUntil: start.Add(g.validity), acquired: time.Now(),
		lost: make(chan struct{}),
	}
	if l.cfg.watchdog.Load() {
		lease.startWatchdog()
	}
	return lease
}

// Acquire waits for the lock until ctx is done, trying again whenever the
// lock is busy or too few nodes answer. With the speed layer off a waiter
// retries after a random delay (Locker.retry); on, the speed layer wakes it
// when the lock is likely free (the speed layer). A cancelled or timed-out wait
// returns errors.Join(ErrNotAcquired, ctx.Err()).
func (l *Locker) Acquire(ctx context.Context, name string) (*Lease, error) {
	start := time.Now()
	var lease *Lease
	var tries int
	var err error
	if l.fast() {
		lease, tries, err = l.acquireFast(ctx, name)
	} else {
		lease, tries, err = l.retry(ctx, name)
	}
	if l.rung.ValidityChecked && err == nil && !time.Now().Before(lease.ValidUntil()) {
		// Redlock hands a lease over only while its validity lasts: one
		// that ran out before it reached the caller (a stalled process, a
		// slow node on the way out of the wait) is a lock that is nobody's
		// any more. The single-node rungs do not check, as taught.
		lease.releaseLater(ctx)
		lease, err = nil, fmt.Errorf("%w: the lease ran out before it was handed over", ErrNotAcquired)
	}
	if errors.Is(err, ErrUnavailable) && ctx.Err() != nil && l.reachable(ctx) {
		// A node failed during the wait, but the wait ran out and the nodes
		// answer now: what kept this caller out was the lock being busy.
		err = errors.Join(ErrNotAcquired, context.Cause(ctx))
	}
	l.observe(locktap.Event{Kind: outcome(err), Variant: l.rung.Name, Key: name, Tries: tries, Wait: time.Since(start), Err: err}, lease)
	return lease, err
}

// fast reports whether the speed layer is on.
func (l *Locker) fast() bool { return l.cfg.fast.Load() }

// ExpectedWait is how long an Acquire of name that starts now can expect to
// wait behind the waiters of this process that are already there, at the
// pace they have lately been served (which counts the turns of other
// processes too). Zero when nobody here waits, or before the pace is known.
// A caller whose budget is shorter can answer busy at once instead of
// waiting it out: past saturation, a longer queue adds latency, not sales.
// Always zero with the speed layer off: nobody is told busy early then.
func (l *Locker) ExpectedWait(name string) time.Duration {
	if !l.fast() {
		return 0
	}
	return l.wake.ExpectedWait(l.keysFor(name).lock)
}

// reachable reports whether the nodes this variant needs answer now, asked
// under a short timeout of its own: the caller's context is already done.
func (l *Locker) reachable(ctx context.Context) bool {
	if l.reach == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 250*time.Millisecond)
	defer cancel()
	return l.reach(ctx) == nil
}

// newValue is a 128-bit random owner value: unguessable, so no other client
// can produce it by accident.
func newValue() string {
	return randhex.String(16)
}

// Lease is one grant of a lock. Release it when done; it is safe for use by
// one holder goroutine plus its watchdog.
type Lease struct {
	locker   *Locker
	name     string
	k        keys
	value    string
	token    uint64
	acquired time.Time

	// hold is taken by the holder's injected pauses and by every watchdog
	// extend, so a paused holder freezes its watchdog too, as a real GC pause
	// or a stopped process would.
	hold sync.Mutex

	mu         sync.Mutex
	validUntil time.Time
	released   bool
	err        error
	lost       chan struct{}
	stopDog    chan struct{}
	stopOnce   sync.Once
	dogDone    chan struct{}
}

// Key is the lock name this lease holds.
func (l *Lease) Key() string { return l.name }

// Variant is the name of the variant that granted the lease.
func (l *Lease) Variant() string { return l.locker.rung.Name }

// Owner is the random value that marks this lease as the owner in Redis.
func (l *Lease) Owner() string { return l.value }

// Token is the fencing token and whether the variant issues one. Tokens of one
// key grow strictly with every grant.
func (l *Lease) Token() (uint64, bool) { return l.token, l.locker.rung.Fenced }

// Acquired is when the lease was granted.
func (l *Lease) Acquired() time.Time { return l.acquired }

// ValidUntil is the time until which the lease is known to be exclusive.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Lost is closed when the lease is known lost (Err); Err then says why.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is nil while the lease is believed held, and ErrLockLost (wrapped)
// once it is known lost: its watchdog found the key gone or, for a lease
// with a watchdog, its last known validity has passed, whatever the
// watchdog is doing then (waiting to try a failed extend again, frozen
// with a paused holder). Past its validity a lease may be someone else's,
// and the process knows it. A lease without a watchdog learns nothing
// after its grant, and its Err stays nil, as taught.
func (l *Lease) Err() error {
	l.mu.Lock()
	err, until := l.err, l.validUntil
	l.mu.Unlock()
	if err != nil || l.stopDog == nil {
		return err
	}
	if late := time.Since(until); late >= 0 {
		return l.markLost(fmt.Errorf("its validity ran out %v ago, not extended in time", late.Round(time.Millisecond)))
	}
	return nil
}

// Extend renews the lease for the locker's TTL. It fails with ErrNotHeld when
// the variant can tell the lease is no longer ours.
func (l *Lease) Extend(ctx context.Context) error {
	start := time.Now()
	validity, err := l.locker.v.extend(ctx, l.k, l.value, l.locker.cfg.ttl)
	if err != nil {
		return fmt.Errorf("extend %q: %w", l.name, err)
	}
	l.mu.Lock()
	l.validUntil = start.Add(validity)
	l.mu.Unlock()
	return nil
}

// Checkpoint is a fault point inside the caller's critical section
// (fault.InCriticalSection). An injected pause freezes the holder and its watchdog;
// an injected crash returns fault.ErrCrashed and the caller must abandon its work
// without releasing, as a dead process would.
func (l *Lease) Checkpoint(ctx context.Context, p fault.Point) error {
	return l.locker.faultPointsFor(l.name, l)(ctx, p)
}

// Release gives the lock back. Releasing twice is a no-op. A release that
// finds the lease gone returns ErrNotHeld where the variant can tell.
func (l *Lease) Release(ctx context.Context) error {
	// The holder stops relying on the lease now, not when Redis answers: a
	// successor may be in before the answer is back.
	begun := time.Now()
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	l.stopWatchdog()
	lk := l.locker
	var err error
	if lk.fast() {
		err = l.releaseFast(ctx)
	} else {
		err = lk.v.release(ctx, lk.faultPointsFor(l.name, l), l.k, l.value)
	}
	lk.observe(locktap.Event{Time: begun, Kind: locktap.Released, Variant: lk.rung.Name, Key: l.name, Err: err}, l)
	if err != nil {
		return fmt.Errorf("release %q: %w", l.name, err)
	}
	return nil
}

// releaseLater gives back, off the caller's path and within a TTL, a lease
// nobody will use: one that ran out before its acquire returned, or one
// handed over to a waiter that is gone or of another variant.
func (l *Lease) releaseLater(ctx context.Context) {
	l.locker.detached(ctx, func(ctx context.Context) { _ = l.Release(ctx) })
}

// detached runs fn off the caller's path with a TTL of its own, whatever
// the caller's ctx: a give-back that a caller who gave up must not stop,
// and that cannot outlast the lease it gives back.
func (l *Locker) detached(ctx context.Context, fn func(ctx context.Context)) {
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ttl)
		defer cancel()
		fn(ctx)
	}()
}

// outcome is the kind of event an acquire that returned err reports.
func outcome(err error) locktap.Kind {
	switch {
	case err == nil:
		return locktap.Acquired
	case errors.Is(err, fault.ErrCrashed):
		return locktap.Crashed
	case errors.Is(err, ErrUnavailable):
		return locktap.Unavailable
	default:
		return locktap.Busy
	}
}

// observe sends e, about lease (nil: about no lease), to the tap's
// observer, if there is one.
func (l *Locker) observe(e locktap.Event, lease *Lease) {
	if l.cfg.observer == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if lease != nil {
		e.Lease = lease
	}
	l.cfg.observer(e)
}
