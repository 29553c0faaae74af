package lock

import (
	"context"
	"strconv"
	"time"

	"flashsale/lock/internal/wire"
)

// redlockFence is redlock (redlock.go) with fencing tokens across its nodes.
// Each node draws a token from its own counter atomically with its SET, so
// the largest token of a quorum is not enough by itself: the next quorum may
// be other nodes whose counters are behind. The lease therefore writes its
// token back as max(counter, token) to a majority of nodes that still hold
// the lease before it is used; any later quorum meets at least one of them,
// so tokens keep growing across holders. A node restarted without its data
// is re-seeded from the others before it votes (restart.go). Release and
// extend are redlock's.
type redlockFence struct{ *redlock }

func (r redlockFence) acquire(ctx context.Context, at gap, k keys, value string, ttl time.Duration) (grant, error) {
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	return r.fencedTake(ctx, at, k, value, ttl, acquireFenced.eval([]string{k.lock, k.fence}, value, ms))
}

// fencedTake sends cmd, a step that takes the lock and draws a token on each
// node, and writes the largest token of the quorum back before the lease is
// used.
func (r redlockFence) fencedTake(ctx context.Context, at gap, k keys, value string, ttl time.Duration, cmd []string) (grant, error) {
	start := time.Now()
	// A grant waits for the first node's answer too: lua+fence draws from
	// that node's counter alone, and only its answer makes this token pass it.
	drawn, _, err := r.take(ctx, at, k, value, start, ttl,
		ask{cmd: cmd, want: wire.Integer, read: readToken, decided: r.wins, first: true})
	if err != nil {
		return grant{}, err
	}
	var token uint64
	for _, v := range drawn {
		token = max(token, v.token)
	}
	// A majority that wrote it back is enough; the other nodes' writes are
	// queued behind on their connections.
	written := r.poll(ctx, ask{cmd: raiseFence.eval([]string{k.lock, k.fence}, value, strconv.FormatUint(token, 10)),
		want: wire.Integer, read: readFlag, decided: r.wins})
	_, validity, err := r.hold(k, value, start, ttl, written)
	if err != nil {
		return grant{}, err
	}
	return grant{validity: validity, token: token}, nil
}

// readToken reads acquireFenced: the token drawn, or 0 if the key is taken.
func readToken(v any) (bool, uint64, error) {
	token, err := wire.Int(v)
	return token > 0, uint64(token), err
}
