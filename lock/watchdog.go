package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"flashsale/internal/locktap"
)

// startWatchdog extends the lease every third of its TTL until it is
// released. Each extend takes the lease's hold mutex, so an injected pause of
// the holder freezes the watchdog too. An extend the node refuses (the key is
// gone or someone else's) marks the lease lost; one that failed otherwise (a
// timeout on a busy node) is tried again at the next tick while the lease's
// validity lasts, since the key may well still be there. The lease is lost
// the moment its validity passes (Err), and Lost closes then.
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
				// No extend moved the validity in time: Err marks it lost,
				// under hold as an extend would, so that a paused holder
				// freezes this too and learns it only when it wakes.
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
// lease's validity passed while it waited for hold (a paused holder): a
// lease past it may be someone else's, and is not renewed. It returns the
// error that loses the lease, if any.
func (l *Lease) tick(every time.Duration) error {
	l.hold.Lock()
	defer l.hold.Unlock()
	select {
	case <-l.stopDog:
		// Stopped while this tick waited for hold (a paused holder that
		// then crashed, or released): no extend after that.
		return nil
	default:
	}
	if l.Err() != nil {
		return nil
	}
	l.locker.observe(locktap.Event{Kind: locktap.Extended, Variant: l.locker.rung.Name, Key: l.name}, l)
	ctx, cancel := context.WithTimeout(context.Background(), every)
	defer cancel()
	err := l.Extend(ctx)
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

// markLost records the loss once and returns the lease's error. It tells
// the observer after l.mu is unlocked: an observer may read the lease (its
// validity, for the history), and under l.mu that read would wait for
// ever, and with it every later look at the lease, its holder's check
// before the write among them. A released lease records nothing more.
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
	l.locker.observe(locktap.Event{Kind: locktap.Lost, Variant: l.locker.rung.Name, Key: l.name, Err: lost}, l)
	return lost
}

// Context returns a context that is cancelled, with the lease's error as its
// cause, when the lease is lost (Lost) or parent is done.
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
