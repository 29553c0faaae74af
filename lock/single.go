package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// setNXPX is the atomic acquire that get-del, plain-del and lua share:
// SET k v NX PX ttl. The key and its TTL are created by one command, so a
// crash right after it leaves a lock that still expires.
func setNXPX(ctx context.Context, rdb *redis.Client, at gap, k keys, value string, ttl time.Duration) (grant, error) {
	ok, err := rdb.SetNX(ctx, k.lock, value, ttl).Result() // SET k v PX ttl NX
	if err != nil {
		return grant{}, down(rdb, err)
	}
	if !ok {
		return grant{}, ErrNotAcquired
	}
	if err := at(ctx, AfterAcquireStep1); err != nil {
		return grant{}, err
	}
	return grant{validity: ttl}, nil
}

// down marks a Redis error as the node being unreachable.
func down(rdb *redis.Client, err error) error {
	return fmt.Errorf("%w: node %s: %w", ErrUnavailable, rdb.Options().Addr, err)
}

// plainExtend is PEXPIRE k ttl with no owner check: the broken variants renew
// whatever lock is there, possibly someone else's.
func plainExtend(ctx context.Context, rdb *redis.Client, k keys, ttl time.Duration) (time.Duration, error) {
	ok, err := rdb.PExpire(ctx, k.lock, ttl).Result()
	if err != nil {
		return 0, down(rdb, err)
	}
	if !ok {
		return 0, ErrNotHeld
	}
	return ttl, nil
}
