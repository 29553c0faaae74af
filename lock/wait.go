package lock

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waker turns Redis keyspace notifications (a lock key deleted or expired)
// into wake-ups for the waiters of this process, so waiting costs one
// attempt per release instead of a polling storm.
type waker struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	keys map[string]*keyWait // by Redis lock key
}

// keyWait is the waiting room of one lock key in this process.
type keyWait struct {
	refs int
	// turn lets one waiter at a time try: blocked senders on a channel are
	// served in arrival order, which makes the wait fair and keeps a hot key
	// to one attempt per release from this process.
	turn chan struct{}
	// freed is closed, and replaced, whenever the key is deleted or expires.
	freed chan struct{}
	// taken is freed as it was when a waiter of this process last acquired:
	// the next waiter knows the lock is held and waits for it to be freed
	// instead of trying straight away.
	taken chan struct{}
}

func newWaker(cfg *config, clients []*redis.Client) *waker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &waker{cancel: cancel, keys: map[string]*keyWait{}}
	if !cfg.notifications {
		return w
	}
	pattern := "__keyspace@*__:" + cfg.namespace + "lock:*"
	for _, c := range clients {
		ps := c.PSubscribe(ctx, pattern)
		w.wg.Go(func() {
			defer ps.Close()
			ch := ps.Channel()
			for {
				select {
				case <-ctx.Done():
					return
				case m, ok := <-ch:
					if !ok {
						return
					}
					switch m.Payload {
					case "del", "expired", "evicted":
						if _, key, ok := strings.Cut(m.Channel, "__:"); ok {
							w.freed(key)
						}
					}
				}
			}
		})
	}
	return w
}

func (w *waker) close() {
	w.cancel()
	w.wg.Wait()
}

func (w *waker) join(key string) *keyWait {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw := w.keys[key]
	if kw == nil {
		kw = &keyWait{turn: make(chan struct{}, 1), freed: make(chan struct{})}
		w.keys[key] = kw
	}
	kw.refs++
	return kw
}

func (w *waker) leave(key string, kw *keyWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if kw.refs--; kw.refs == 0 {
		delete(w.keys, key)
	}
}

func (w *waker) freed(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if kw := w.keys[key]; kw != nil {
		close(kw.freed)
		kw.freed = make(chan struct{})
	}
}

// current is the channel the next deletion or expiry of the key will close.
func (w *waker) current(kw *keyWait) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return kw.freed
}

func (w *waker) markTaken(kw *keyWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw.taken = kw.freed
}

func (w *waker) lastTaken(kw *keyWait) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return kw.taken
}

// acquire waits its turn among this process's waiters, then tries; after a
// busy answer it sleeps until the key is freed or a jittered backoff
// (doubling from backoffMin to backoffMax) runs out, whichever comes first.
// Busy and unavailable answers are retried until ctx is done; a crash is not.
func (l *Locker) acquire(ctx context.Context, name string) (*Lease, int, error) {
	key := l.keysFor(name).lock
	kw := l.wake.join(key)
	defer l.wake.leave(key, kw)

	select {
	case kw.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, errors.Join(ErrNotAcquired, context.Cause(ctx))
	}
	defer func() { <-kw.turn }()

	wait := l.wake.lastTaken(kw)
	backoff := l.cfg.backoffMin
	var last error = ErrNotAcquired
	for tries := 0; ; {
		if wait != nil {
			t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
			select {
			case <-wait:
			case <-t.C:
				backoff = min(2*backoff, l.cfg.backoffMax)
			case <-ctx.Done():
				t.Stop()
				return nil, tries, errors.Join(last, context.Cause(ctx))
			}
			t.Stop()
		}
		freed := l.wake.current(kw) // before trying, so a release during the try is not missed
		lease, err := l.try(ctx, name)
		tries++
		switch {
		case err == nil:
			l.wake.markTaken(kw)
			return lease, tries, nil
		case errors.Is(err, ErrCrashed), ctx.Err() != nil:
			return nil, tries, errors.Join(err, context.Cause(ctx))
		}
		last, wait = err, freed
	}
}
