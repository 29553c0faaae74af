package ladder

import (
	"context"
	"errors"
	"flashsale/lock"

	"github.com/redis/go-redis/v9"
)

// LuaCheck is the name of the single-node lock whose holder checks its lease before writing.
const LuaCheck = "lua+check"

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
type luaCheck struct {
	lock.Protocol // the single-node lock on rdb
	rdb           *redis.Client
}

func (v luaCheck) Check(ctx context.Context, key, value string) error {
	got, err := v.rdb.Get(ctx, key).Result() // GET k: still ours?
	if errors.Is(err, redis.Nil) || (err == nil && got != value) {
		return lock.ErrNotHeld
	}
	if err != nil {
		return down(v.rdb, err)
	}
	return nil
}
