package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
)

// setnxExpire is the first pattern the articles warn about: SETNX k v, then
// EXPIRE k ttl as a second command, and DEL k to release.
//
// Where it breaks: between SETNX and EXPIRE. A client that dies there (or
// whose EXPIRE is lost in a network blip) leaves a key with no TTL; nobody
// ever acquires that lock again and the SKU never sells again (deadlock).
// The release (a plain DEL) has the plain-del flaw as well.
type setnxExpire struct{ rdb *redis.Client }

func (v setnxExpire) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	ok, err := v.rdb.Do(ctx, "setnx", k.lock, value).Bool() // step 1: SETNX k v — no TTL yet
	if err != nil {
		return grant{}, down(v.rdb, err)
	}
	if !ok {
		return grant{}, ErrNotAcquired
	}
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil { // BROKEN: a crash here leaves k with no TTL
		return grant{}, err
	}
	if err := v.rdb.PExpire(ctx, k.lock, ttl).Err(); err != nil { // step 2: EXPIRE k ttl (as PEXPIRE: a TTL under a second)
		return grant{}, down(v.rdb, err)
	}
	return grant{validity: ttl}, nil
}

func (v setnxExpire) release(ctx context.Context, _ faultPoints, k keys, _ string) error {
	if err := v.rdb.Del(ctx, k.lock).Err(); err != nil { // DEL k, whoever holds it
		return down(v.rdb, err)
	}
	return nil
}

func (v setnxExpire) extend(ctx context.Context, k keys, _ string, ttl time.Duration) (time.Duration, error) {
	return plainExtend(ctx, v.rdb, k, ttl)
}
