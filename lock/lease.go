package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"flashsale/internal/fault"
)

// Lease is one grant of a lock. Release it when done; it is safe for use by
// one holder goroutine plus its watchdog.
type Lease struct {
	locker   *Locker
	name     string
	k        keys
	value    string
	token    uint64
	acquired time.Time

	hold sync.Mutex // held by injected pauses and every watchdog extend: a paused holder freezes its watchdog

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

// Owner is the random value that marks this lease as the owner in Redis.
func (l *Lease) Owner() string { return l.value }

// Token is the fencing token and whether the variant issues one. Tokens of one
// key grow strictly with every grant.
func (l *Lease) Token() (uint64, bool) { return l.token, l.locker.variant.Fenced }

// Acquired is when the lease was granted.
func (l *Lease) Acquired() time.Time { return l.acquired }

// ValidUntil is the time until which the lease is known to be exclusive.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Err is nil while the lease is believed held, and ErrLockLost (wrapped)
// once it is known lost: its watchdog found the key gone, or, with a
// watchdog, its last known validity has passed, whatever the watchdog is
// doing then. A lease without a watchdog learns nothing after its grant:
// its Err stays nil, as taught.
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

// extend renews the lease for the locker's TTL, as its watchdog does. It
// fails with ErrNotHeld when the variant can tell the lease is no longer
// ours.
func (l *Lease) extend(ctx context.Context) error {
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

// Checkpoint is a point named point inside the caller's critical section,
// told to Options.Trace's Step hook. A pause there stalls the holder and
// its watchdog; an error is a crash: Checkpoint returns it, and the caller
// must abandon its work without releasing, as a dead process would.
func (l *Lease) Checkpoint(ctx context.Context, point string) error {
	return l.step(ctx, point)
}

// step is the lease's fault points.
func (l *Lease) step(ctx context.Context, p fault.Point) error {
	return l.locker.steps(l.name, l)(ctx, p)
}

// Release gives the lock back. Releasing twice is a no-op. A release that
// finds the lease gone returns ErrNotHeld where the variant can tell.
func (l *Lease) Release(ctx context.Context) error {
	begun := time.Now() // the holder stops relying on the lease now, not at the answer
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
	if lk.cfg.fast.Load() {
		err = l.releaseFast(ctx)
	} else {
		err = lk.v.release(ctx, lk.steps(l.name, l), l.k, l.value)
	}
	lk.observe(lk.cfg.trace.Release, l, begun, err)
	if err != nil {
		return fmt.Errorf("release %q: %w", l.name, err)
	}
	return nil
}

// releaseLater gives back, off the caller's path and within a TTL, a lease
// nobody will use.
func (l *Lease) releaseLater(ctx context.Context) {
	l.locker.detached(ctx, func(ctx context.Context) { _ = l.Release(ctx) })
}

// leaseChecked is a variant whose holder looks at its lease once more just
// before it writes (lua+check).
type leaseChecked interface {
	// check reports ErrNotHeld when the key no longer carries value.
	check(ctx context.Context, k keys, value string) error
}

// CheckBeforeWrite is the holder's last step before it writes. Every
// variant refuses, with ErrLockLost, a lease the process knows is lost
// (Err); a rung whose protocol checks its lease (a Check method, as the
// workshop's lua+check has) also refuses a lease past its validity or whose
// key no longer carries the holder's value. Then comes the
// "after-lease-check" point (Trace.Step): a pause there lands between the
// check and the write, the window only fencing closes.
func (l *Lease) CheckBeforeWrite(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return fmt.Errorf("check %q before writing: %w", l.name, err) // already ErrLockLost
	}
	if c, ok := l.locker.v.(leaseChecked); ok {
		if err := l.checkLease(ctx, c); err != nil {
			return fmt.Errorf("check %q before writing: %w", l.name, err)
		}
	}
	return l.Checkpoint(ctx, fault.AfterLeaseCheck)
}

// checkLease asks this process's clock first, then the node.
func (l *Lease) checkLease(ctx context.Context, c leaseChecked) error {
	if late := time.Since(l.ValidUntil()); late >= 0 {
		return fmt.Errorf("%w: its validity ran out %v ago", ErrLockLost, late.Round(time.Millisecond))
	}
	if err := c.check(ctx, l.k, l.value); err != nil {
		return fmt.Errorf("%w: %w", ErrLockLost, err)
	}
	return nil
}

// startWatchdog extends the lease every third of its TTL until it is
// released, each extend under hold. A refused extend loses the lease; one
// that failed otherwise (a timeout) is tried again at the next tick while
// the validity lasts. The lease is lost the moment its validity passes.
func (l *Lease) startWatchdog() {
	l.stopDog = make(chan struct{})
	l.dogDone = make(chan struct{})
	every := l.locker.cfg.ttl / 3
	go func() {
		defer close(l.dogDone)
		t := time.NewTicker(every)
		defer t.Stop()
		over := time.NewTimer(time.Until(l.ValidUntil()))
		defer over.Stop()
		for {
			select {
			case <-l.stopDog:
				return
			case <-over.C:
				// Under hold, so a paused holder learns it only when it wakes.
				l.hold.Lock()
				err := l.Err()
				l.hold.Unlock()
				if err != nil {
					return
				}
			case <-t.C:
				if err := l.tick(every); err != nil {
					l.markLost(err)
					return
				}
			}
			l.mu.Lock()
			lost := l.err != nil
			l.mu.Unlock()
			if lost {
				return
			}
			over.Reset(time.Until(l.ValidUntil()))
		}
	}()
}

// tick sends one extend under hold, unless the watchdog was stopped or the
// validity passed while it waited for hold: a lease past it may be someone
// else's. It returns the error that loses the lease, if any.
func (l *Lease) tick(every time.Duration) error {
	l.hold.Lock()
	defer l.hold.Unlock()
	select {
	case <-l.stopDog:
		return nil // stopped while this tick waited for hold
	default:
	}
	if l.Err() != nil {
		return nil
	}
	l.locker.observe(l.locker.cfg.trace.Extend, l, time.Now(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), every)
	defer cancel()
	err := l.extend(ctx)
	if err != nil && (errors.Is(err, ErrNotHeld) || !time.Now().Before(l.ValidUntil())) {
		return err
	}
	return nil
}

// stopWatchdog stops the watchdog, if any, and waits for it; it may be
// called more than once (a release, a crash).
func (l *Lease) stopWatchdog() {
	if l.stopDog == nil {
		return
	}
	l.hold.Lock()
	l.signalStop()
	l.hold.Unlock()
	<-l.dogDone
}

// signalStop tells the watchdog to stop, with hold held by the caller: a
// tick that waits for hold finds it stopped once it gets it, so no extend
// starts after the decision to stop.
func (l *Lease) signalStop() {
	if l.stopDog != nil {
		l.stopOnce.Do(func() { close(l.stopDog) })
	}
}

// crashed is what an injected crash does, with hold held: the holder is
// dead, so its watchdog dies with it and nothing releases the lease, which
// runs out at its TTL as a dead process's would.
func (l *Lease) crashed() {
	l.mu.Lock()
	l.released = true // nothing of a dead holder releases it later
	l.mu.Unlock()
	l.signalStop()
}

// markLost records the loss once and returns the lease's error; a released
// lease records nothing. The observer hears of it after l.mu is unlocked,
// since it may read the lease.
func (l *Lease) markLost(err error) error {
	lost := fmt.Errorf("%w: %w", ErrLockLost, err)
	l.mu.Lock()
	if l.err != nil {
		defer l.mu.Unlock()
		return l.err
	}
	if l.released {
		l.mu.Unlock()
		return lost
	}
	l.err = lost
	close(l.lost)
	l.mu.Unlock()
	l.locker.observe(l.locker.cfg.trace.Lose, l, time.Now(), lost)
	return lost
}

// Context returns a context that is cancelled, with the lease's error as its
// cause, when the lease is known lost (Err) or parent is done.
func (l *Lease) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-l.lost:
			cancel(l.Err())
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
