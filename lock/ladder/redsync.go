package ladder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/lock"
)

// Redsync is the name of the Redlock of github.com/go-redsync/redsync.
const Redsync = "redsync"

// redsyncLock is the Go Redlock library most projects install
// (github.com/go-redsync/redsync/v4), through its public API with its own
// defaults over go-redis pools to the same nodes: a lease is a Mutex named
// after the lock key, with the TTL as its expiry and the owner value as its
// value. Its waiting is the library's too: tries 50–250 ms apart until the
// caller's deadline; without one, a single try. Its clients are as users
// make them, so a frozen node costs a try go-redis's 3 s read timeout; the
// adapter returns at the caller's deadline and undoes a late grant.
//
// Where it breaks: it is a careful Redlock without restart awareness, so a
// node that comes back without its data votes at once for a second client
// (node-restart, failover); without fencing tokens, so a holder paused past
// its TTL writes beside its successor; and without a watchdog, so work
// longer than the TTL loses the lock unless the caller extends it (the
// watchdog switch here calls its Extend).
type redsyncLock struct{ rs *redsync.Redsync }

// newRedsync is the library over plain clients of the same nodes.
func newRedsync(plain []*redis.Client) redsyncLock {
	pools := make([]rsredis.Pool, len(plain))
	for i, c := range plain {
		pools[i] = rsgoredis.NewPool(c)
	}
	return redsyncLock{redsync.New(pools...)}
}

// mutex is the library's Mutex for one lease; one made again with the same
// value releases or extends it, as the library documents.
func (v redsyncLock) mutex(key, value string, ttl time.Duration, opts ...redsync.Option) *redsync.Mutex {
	return v.rs.NewMutex(key, append([]redsync.Option{
		redsync.WithExpiry(ttl),
		redsync.WithValue(value),
		redsync.WithGenValueFunc(func() (string, error) { return value, nil }),
	}, opts...)...)
}

func (v redsyncLock) Acquire(ctx context.Context, checkpoint step, key, value string, ttl time.Duration) (time.Duration, error) {
	start := time.Now()
	var m *redsync.Mutex
	if _, budget := ctx.Deadline(); budget {
		m = v.mutex(key, value, ttl) // the library's tries and delays, until the wait's deadline
	} else {
		m = v.mutex(key, value, ttl, redsync.WithTries(1)) // no budget: one try (TryAcquire)
	}
	if err := lockWithin(ctx, m); err != nil {
		return 0, redsyncErr(err)
	}
	// One call took the lock everywhere it could: a crash here leaves keys
	// that still expire.
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return 0, err
	}
	return m.Until().Sub(start), nil
}

func (v redsyncLock) Release(ctx context.Context, _ step, key, value string) error {
	ok, err := v.mutex(key, value, 0).UnlockContext(ctx)
	if !ok {
		return redsyncReleaseErr(err)
	}
	return nil
}

func (v redsyncLock) Extend(ctx context.Context, key, value string, ttl time.Duration) (time.Duration, error) {
	start := time.Now()
	m := v.mutex(key, value, ttl)
	ok, err := m.ExtendContext(ctx)
	if !ok {
		return 0, redsyncReleaseErr(err)
	}
	return m.Until().Sub(start), nil
}

// lockWithin is m.LockContext(ctx), answered by ctx's deadline at the
// latest: a try that outlives it (a frozen node, read with go-redis's own
// timeout) is left to end by itself and undone if it took the lock.
func lockWithin(ctx context.Context, m *redsync.Mutex) error {
	done := make(chan error, 1)
	go func() { done <- m.LockContext(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				_, _ = m.UnlockContext(context.Background())
			}
		}()
		return ctx.Err()
	}
}

// redsyncErr reads a failed acquire: busy, unless a node failed to answer
// and no node said the lock was taken.
func redsyncErr(err error) error {
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	var rerr *redsync.RedisError
	switch {
	case errors.As(err, &taken), errors.As(err, &nodeTaken), !errors.As(err, &rerr):
		return fmt.Errorf("%w: %w", lock.ErrNotAcquired, err)
	default:
		return fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
}

// redsyncReleaseErr reads a release or extend short of a majority: not
// held, unless a node failed to answer.
func redsyncReleaseErr(err error) error {
	var rerr *redsync.RedisError
	if errors.As(err, &rerr) {
		return fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
	if err == nil {
		return lock.ErrNotHeld
	}
	return fmt.Errorf("%w: %w", lock.ErrNotHeld, err)
}
