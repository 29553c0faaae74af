package ladder

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/lock"
)

// Attendee is the name of the rung the attendees write.
const Attendee = "attendee"

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
type attendee struct {
	lua lock.Protocol // the single-node lock on rdb
	rdb *redis.Client
}

func (v attendee) Acquire(ctx context.Context, checkpoint step, key, value string, ttl time.Duration) (time.Duration, error) {
	// SET k v NX PX ttl
	err := v.rdb.Do(ctx, "set", key, value, "nx", "px", ms(ttl)).Err()
	// SPOT THE FLAW: redis.Nil means "no such key", so the lock was free… or does it, here?
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, down(v.rdb, err)
	}
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return 0, err
	}
	return ttl, nil
}

func (v attendee) Release(ctx context.Context, checkpoint step, key, value string) error {
	got, err := v.rdb.Get(ctx, key).Result() // 1. is the lock still ours?
	switch {
	case errors.Is(err, redis.Nil), err == nil && got != value:
		return lock.ErrNotHeld
	case err != nil:
		return down(v.rdb, err)
	}
	if err := checkpoint(ctx, fault.BetweenReleaseSteps); err != nil { // FIX ME: the lease can run out and change hands here
		return err
	}
	if err := v.rdb.Del(ctx, key).Err(); err != nil { // 2. DEL k, whoever holds it by now
		return down(v.rdb, err)
	}
	return nil
}

// extend is lua's owner-checked PEXPIRE; it is not part of the exercise.
func (v attendee) Extend(ctx context.Context, key, value string, ttl time.Duration) (time.Duration, error) {
	return v.lua.Extend(ctx, key, value, ttl)
}
