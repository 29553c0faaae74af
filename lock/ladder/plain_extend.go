package ladder

import (
	"context"
	"flashsale/lock"
	"time"

	"github.com/redis/go-redis/v9"
)

// plainExtend is PEXPIRE k ttl with no owner check, the renewal of the
// broken rungs (setnxExpire, getDel, plainDel): it renews
// whatever lock is there, possibly someone else's.
func plainExtend(ctx context.Context, rdb *redis.Client, key string, ttl time.Duration) (time.Duration, error) {
	ok, err := rdb.PExpire(ctx, key, ttl).Result()
	if err != nil {
		return 0, down(rdb, err)
	}
	if !ok {
		return 0, lock.ErrNotHeld
	}
	return ttl, nil
}
