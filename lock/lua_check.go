package lock

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// luaCheck is lua whose holder checks its lease just before it
// writes, as many implementations advise: the validity left (from this
// process's clock) and GET k == our value (from the node). A holder paused
// inside its critical section past the TTL wakes, checks, finds the lease
// gone and writes nothing.
//
// Where it still breaks: the check and the write are two steps, so a pause
// between them (AfterLeaseCheck) lets a holder check "still mine", stall
// past the TTL, and write beside its successor. The check narrows the
// window to the time between the check and the write; it cannot close it.
// Only the store can, by refusing the stale write (lua+fence).
type luaCheck struct{ luaLock }

func (v luaCheck) check(ctx context.Context, k keys, value string) error {
	got, err := v.rdb.Get(ctx, k.lock).Result() // GET k: still ours?
	if errors.Is(err, redis.Nil) || (err == nil && got != value) {
		return ErrNotHeld
	}
	if err != nil {
		return down(v.rdb, err)
	}
	return nil
}
