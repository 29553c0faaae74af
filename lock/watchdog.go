package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// startWatchdog extends the lease every third of its TTL until it is
// released. Each extend takes the lease's hold mutex, so an injected pause of
// the holder freezes the watchdog too. An extend the node refuses (the key is
// gone or someone else's) marks the lease lost; one that failed otherwise (a
// timeout on a busy node) is tried again at the next tick while the lease's
// validity lasts, since the key may well still be there.
func (l *Lease) startWatchdog() {
	l.stopDog = make(chan struct{})
	l.dogDone = make(chan struct{})
	every := l.locker.cfg.ttl / 3
	go func() {
		defer close(l.dogDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-l.stopDog:
				return
			case <-t.C:
			}
			l.hold.Lock()
			select {
			case <-l.stopDog:
				// Stopped while this tick waited for hold (a paused holder
				// that then crashed, or released): no extend after that.
				l.hold.Unlock()
				return
			default:
			}
			l.locker.observe(Event{Kind: Extended, Variant: l.locker.name, Key: l.name, Lease: l})
			ctx, cancel := context.WithTimeout(context.Background(), every)
			err := l.Extend(ctx)
			cancel()
			l.hold.Unlock()
			if err != nil && (errors.Is(err, ErrNotHeld) || !time.Now().Before(l.ValidUntil())) {
				l.markLost(err)
				return
			}
		}
	}()
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

// crashed is what an injected crash does to a lease, with hold held by the
// fault point that decided it: its holder is dead, so the watchdog dies
// with it and nothing will release it. The lease runs out at its TTL, as a
// dead process's would; a watchdog left running would keep it alive for
// ever, and one extend sent after the crash would stretch it by a TTL.
func (l *Lease) crashed() {
	l.mu.Lock()
	l.released = true // nothing of a dead holder releases it later
	l.mu.Unlock()
	l.signalStop()
}

// markLost records the loss once and tells the observer after l.mu is
// unlocked: an observer may read the lease (its validity, for the history),
// and under l.mu that read would wait for ever, and with it every later
// look at the lease, its holder's check before the write among them.
func (l *Lease) markLost(err error) {
	l.mu.Lock()
	if l.err != nil || l.released {
		l.mu.Unlock()
		return
	}
	l.err = fmt.Errorf("%w: %w", ErrLockLost, err)
	close(l.lost)
	lost := l.err
	l.mu.Unlock()
	l.locker.observe(Event{Kind: Lost, Variant: l.locker.name, Key: l.name, Lease: l, Err: lost})
}

// Context returns a context that is cancelled, with the lease's error as its
// cause, when the watchdog loses the lease or parent is done.
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
