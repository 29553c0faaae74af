package ladder

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/lock"
)

// SetNXExpire is the name of SETNX, then EXPIRE.
const SetNXExpire = "setnx-expire"

// setnxExpire is the first pattern the articles warn about: SETNX k v, then
// EXPIRE k ttl as a second command, and DEL k to release.
//
// Where it breaks: between SETNX and EXPIRE. A client that dies there (or
// whose EXPIRE is lost in a network blip) leaves a key with no TTL; nobody
// ever acquires that lock again and the SKU never sells again (deadlock).
// The release (a plain DEL) has the plain-del flaw as well.
type setnxExpire struct{ rdb *redis.Client }

func (v setnxExpire) Acquire(ctx context.Context, checkpoint step, key, value string, ttl time.Duration) (time.Duration, error) {
	ok, err := v.rdb.Do(ctx, "setnx", key, value).Bool() // step 1: SETNX k v — no TTL yet
	if err != nil {
		return 0, down(v.rdb, err)
	}
	if !ok {
		return 0, lock.ErrNotAcquired
	}
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil { // BROKEN: a crash here leaves k with no TTL
		return 0, err
	}
	if err := v.rdb.PExpire(ctx, key, ttl).Err(); err != nil { // step 2: EXPIRE k ttl (as PEXPIRE: a TTL under a second)
		return 0, down(v.rdb, err)
	}
	return ttl, nil
}

func (v setnxExpire) Release(ctx context.Context, _ step, key string, _ string) error {
	if err := v.rdb.Del(ctx, key).Err(); err != nil { // DEL k, whoever holds it
		return down(v.rdb, err)
	}
	return nil
}

func (v setnxExpire) Extend(ctx context.Context, key string, _ string, ttl time.Duration) (time.Duration, error) {
	return plainExtend(ctx, v.rdb, key, ttl)
}
