package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// plainExtend is PEXPIRE k ttl with no owner check, the renewal of the
// broken rungs (setnxExpire, getDel, plainDel): it renews
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
