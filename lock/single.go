package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

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
