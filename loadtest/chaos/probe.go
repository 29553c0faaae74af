package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock"
)

// probeNamespace keeps the recovery probe's keys apart from the app's: it
// never takes, releases or re-seeds a lock the instances use.
const probeNamespace = "chaos-probe:"

// probeEvery is how often a recovery probe tries its lock.
const probeEvery = 50 * time.Millisecond

// probeLocker is a one-node Redlock (quorum 1) over the node at o, as any
// new client of the library would build it: the run's lease TTL, the
// largest in use, restart awareness on, the speed layer off (it listens for
// nothing and probes nothing), its own namespace. This is the chaos
// runner's only use of the lock's options. Meeting the node may mark it
// (the data-birth marker), if no instance has re-marked it yet: harmless,
// the instances' own next meeting would do the same, and the marker is the
// node's, of no one application.
func probeLocker(o *redis.Options, ttl time.Duration) (*lock.Locker, io.Closer, error) {
	ls, err := lock.New([]*redis.Options{o}, lock.Options{TTL: ttl, Namespace: probeNamespace,
		FastOff: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, fmt.Errorf("recovery probe: %w", err)
	}
	l, err := ls.Locker(lock.Redlock)
	if err != nil {
		_ = ls.Close()
		return nil, nil, fmt.Errorf("recovery probe: %w", err)
	}
	return l, ls, nil
}

// firstGrant builds a probe over the node at o and tries key every
// probeEvery until the first grant, which it releases; it returns when that
// grant's answer came in, or the zero time if ctx ended first.
func firstGrant(ctx context.Context, o *redis.Options, ttl time.Duration, key string) (time.Time, error) {
	l, closer, err := probeLocker(o, ttl)
	if err != nil {
		return time.Time{}, err
	}
	defer closer.Close()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		if lease, err := l.TryAcquire(ctx, key); err == nil {
			at := time.Now()
			rel, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
			_ = lease.Release(rel) // the lease runs out within its TTL anyway
			cancel()
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, nil
		case <-tick.C:
		}
	}
}
