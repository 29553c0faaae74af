package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// plainDel acquires correctly (SET k v NX PX ttl) and releases with a bare
// DEL k, never checking that the lock is still ours (the articles'
// "jedis.del(key)").
//
// Where it breaks: a holder whose critical section outlives the TTL comes
// back and deletes the lock its successor now holds, letting a third client
// in beside the second.
type plainDel struct{ rdb *redis.Client }

func (v plainDel) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	return luaLock(v).acquire(ctx, checkpoint, k, value, ttl) // SET k v NX PX ttl, as luaLock
}

func (v plainDel) release(ctx context.Context, _ faultPoints, k keys, _ string) error {
	if err := v.rdb.Del(ctx, k.lock).Err(); err != nil { // BROKEN: DEL k, whoever holds it now
		return down(v.rdb, err)
	}
	return nil
}

func (v plainDel) extend(ctx context.Context, k keys, _ string, ttl time.Duration) (time.Duration, error) {
	return plainExtend(ctx, v.rdb, k, ttl)
}
