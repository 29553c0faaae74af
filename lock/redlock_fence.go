package lock

import (
	"context"
	"strconv"
	"time"

	"flashsale/lock/internal/node"
)

// redlockFence is redlock (redlock.go) with fencing tokens across its nodes:
// this project's own answer to "Redlock issues no fencing token", not a
// standard recipe. Each node draws a token from its own counter atomically
// with its SET, so the largest token of a quorum is not enough by itself:
// the next quorum may be other nodes whose counters are behind. The lease
// therefore writes its token back as max(counter, token) to a majority of
// nodes that still hold the lease before it is used; any later quorum meets
// at least one of them, so tokens keep growing across holders. A node
// restarted without its data is re-seeded from the others before it votes
// (internal/node). Release and extend are redlock's.
//
// What makes it safe is the store, not the counters: the store registers a
// token on the row only if it is strictly greater than the one there, and
// writes only where the row still carries it, so a token that went
// backwards is refused. Write-back and re-seeding keep tokens growing, so
// that legitimate holders are not refused: they buy availability.
type redlockFence struct{ *redlock }

func (r redlockFence) acquire(ctx context.Context, at gap, k keys, value string, ttl time.Duration) (grant, error) {
	return r.fenced(ctx, at, k, value, ttl, acquireFenced.call([]string{k.lock, k.fence}, value, ms(ttl)))
}

// fenced is redlock's acquire, steps 1 to 5, with take in place of SET NX
// PX: a script that takes the lock and draws a token on each node
// (acquireFenced, lua+fence's). And one step more: the largest token of the
// quorum is written back before the lease is used.
func (r redlockFence) fenced(ctx context.Context, at gap, k keys, value string, ttl time.Duration, take node.Command) (grant, error) {
	start := time.Now()
	// A yes is decided only once the first node has answered too: lua+fence
	// draws from that node's counter alone, and only its answer makes this
	// token pass it.
	drawn := r.ask(ctx, take, enough{yes: r.quorum(), first: true})
	if err := at(ctx, AfterAcquireStep1); err != nil {
		return grant{}, err
	}
	if _, err := r.lease("acquire", k, drawn, start, ttl); err != nil {
		r.unlock(k, value)
		return grant{}, err
	}
	var token uint64
	for _, v := range drawn {
		if v.yes && v.counts {
			token = max(token, uint64(v.num))
		}
	}
	// The write-back: a majority that still holds our value raises its
	// counter to the token; the other nodes get it all the same.
	written := r.ask(ctx, raiseFence.call([]string{k.lock, k.fence}, value, strconv.FormatUint(token, 10)), r.majority())
	g, err := r.lease("acquire", k, written, start, ttl)
	if err != nil {
		r.unlock(k, value)
		return grant{}, err
	}
	g.token = token
	return g, nil
}

// raiseFence writes a chosen token back as max(counter, token), but only on
// a node where our lease still stands: a later grant on that node then
// draws a larger token. KEYS[1] lock, KEYS[2] fence counter; ARGV[1] owner
// value, ARGV[2] token. Returns 1 if the lease stands there.
var raiseFence = newScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
if tonumber(redis.call("get", KEYS[2]) or "0") < tonumber(ARGV[2]) then
	redis.call("set", KEYS[2], ARGV[2])
end
return 1`)
