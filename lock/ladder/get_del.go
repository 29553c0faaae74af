package ladder

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/lock"
)

// GetDel is the name of released by GET, then DEL.
const GetDel = "get-del"

// getDel acquires correctly (SET k v NX PX ttl) but releases in two commands,
// as the commonest "check the owner first" answer does: GET k, compare with our
// value, then DEL k.
//
// Where it breaks: between GET and DEL. If the holder stalls there past the
// TTL, the lock expires, another client takes it, and our DEL deletes the new
// holder's lock: a third client can now enter beside the second (two holders).
type getDel struct {
	lua lock.Protocol // the single-node lock on rdb
	rdb *redis.Client
}

func (v getDel) Acquire(ctx context.Context, checkpoint step, key, value string, ttl time.Duration) (time.Duration, error) {
	return v.lua.Acquire(ctx, checkpoint, key, value, ttl) // SET k v NX PX ttl, as lua
}

func (v getDel) Release(ctx context.Context, checkpoint step, key, value string) error {
	got, err := v.rdb.Get(ctx, key).Result() // step 1: GET k
	if errors.Is(err, redis.Nil) || (err == nil && got != value) {
		return lock.ErrNotHeld
	}
	if err != nil {
		return down(v.rdb, err)
	}
	if err := checkpoint(ctx, fault.BetweenReleaseSteps); err != nil { // BROKEN: k may expire and change hands here
		return err
	}
	if err := v.rdb.Del(ctx, key).Err(); err != nil { // step 2: DEL k — maybe no longer ours
		return down(v.rdb, err)
	}
	return nil
}

func (v getDel) Extend(ctx context.Context, key string, _ string, ttl time.Duration) (time.Duration, error) {
	return plainExtend(ctx, v.rdb, key, ttl)
}
