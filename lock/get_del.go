package lock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
)

// getDel acquires correctly (SET k v NX PX ttl) but releases in two commands,
// as the commonest "check the owner first" answer does: GET k, compare with our
// value, then DEL k.
//
// Where it breaks: between GET and DEL. If the holder stalls there past the
// TTL, the lock expires, another client takes it, and our DEL deletes the new
// holder's lock: a third client can now enter beside the second (two holders).
type getDel struct{ rdb *redis.Client }

func (v getDel) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	return luaLock(v).acquire(ctx, checkpoint, k, value, ttl) // SET k v NX PX ttl, as luaLock
}

func (v getDel) release(ctx context.Context, checkpoint faultPoints, k keys, value string) error {
	got, err := v.rdb.Get(ctx, k.lock).Result() // step 1: GET k
	if errors.Is(err, redis.Nil) || (err == nil && got != value) {
		return ErrNotHeld
	}
	if err != nil {
		return down(v.rdb, err)
	}
	if err := checkpoint(ctx, fault.BetweenReleaseSteps); err != nil { // BROKEN: k may expire and change hands here
		return err
	}
	if err := v.rdb.Del(ctx, k.lock).Err(); err != nil { // step 2: DEL k — maybe no longer ours
		return down(v.rdb, err)
	}
	return nil
}

func (v getDel) extend(ctx context.Context, k keys, _ string, ttl time.Duration) (time.Duration, error) {
	return plainExtend(ctx, v.rdb, k, ttl)
}
