package lock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
)

// attendee is the rung attendees write in Lab 15 (docs/labs/15-your-own-rung.md):
// a single-node lock on the first node, shipped with two flaws for
// the matrix to show. Its acquire misreads what redis.Nil means for SET NX;
// its release checks and deletes in two commands. The goal is lua's row of
// the matrix; this command says when it is reached (exit status 0):
//
//	go run ./loadtest/cmd/loadtest -variants attendee -scenarios clean,crash-between-steps,pause-between-release-steps -judge-as lua -strict
//
// Keep every checkpoint(ctx, …) call wherever one step can still be separated from
// the next: the faults land there, and a rung that drops them only hides its
// flaw from the matrix.
type attendee struct{ rdb *redis.Client }

func (v attendee) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	// SET k v NX PX ttl
	err := v.rdb.Do(ctx, "set", k.lock, value, "nx", "px", ms(ttl)).Err()
	// SPOT THE FLAW: redis.Nil means "no such key", so the lock was free… or does it, here?
	if err != nil && !errors.Is(err, redis.Nil) {
		return grant{}, down(v.rdb, err)
	}
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return grant{}, err
	}
	return grant{validity: ttl}, nil
}

func (v attendee) release(ctx context.Context, checkpoint faultPoints, k keys, value string) error {
	got, err := v.rdb.Get(ctx, k.lock).Result() // 1. is the lock still ours?
	switch {
	case errors.Is(err, redis.Nil), err == nil && got != value:
		return ErrNotHeld
	case err != nil:
		return down(v.rdb, err)
	}
	if err := checkpoint(ctx, fault.BetweenReleaseSteps); err != nil { // FIX ME: the lease can run out and change hands here
		return err
	}
	if err := v.rdb.Del(ctx, k.lock).Err(); err != nil { // 2. DEL k, whoever holds it by now
		return down(v.rdb, err)
	}
	return nil
}

// extend is lua's owner-checked PEXPIRE; it is not part of the exercise.
func (v attendee) extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error) {
	return luaLock(v).extend(ctx, k, value, ttl)
}
