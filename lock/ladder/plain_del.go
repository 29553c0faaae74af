package ladder

import (
	"context"
	"flashsale/lock"
	"time"

	"github.com/redis/go-redis/v9"
)

// PlainDel is the name of released by a DEL without an owner check.
const PlainDel = "plain-del"

// plainDel acquires correctly (SET k v NX PX ttl) and releases with a bare
// DEL k, never checking that the lock is still ours (the articles'
// "jedis.del(key)").
//
// Where it breaks: a holder whose critical section outlives the TTL comes
// back and deletes the lock its successor now holds, letting a third client
// in beside the second.
type plainDel struct {
	lua lock.Protocol // the single-node lock on rdb
	rdb *redis.Client
}

func (v plainDel) Acquire(ctx context.Context, checkpoint step, key, value string, ttl time.Duration) (time.Duration, error) {
	return v.lua.Acquire(ctx, checkpoint, key, value, ttl) // SET k v NX PX ttl, as lua
}

func (v plainDel) Release(ctx context.Context, _ step, key string, _ string) error {
	if err := v.rdb.Del(ctx, key).Err(); err != nil { // BROKEN: DEL k, whoever holds it now
		return down(v.rdb, err)
	}
	return nil
}

func (v plainDel) Extend(ctx context.Context, key string, _ string, ttl time.Duration) (time.Duration, error) {
	return plainExtend(ctx, v.rdb, key, ttl)
}
