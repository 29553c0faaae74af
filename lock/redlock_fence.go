package lock

import (
	"context"
	"strconv"
	"time"
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
// (restart.go). Release and extend are redlock's.
//
// What makes it safe is the store, not the counters: the store registers a
// token on the row only if it is strictly greater than the one there, and
// writes only where the row still carries it, so a token that went
// backwards is refused. Write-back and re-seeding keep tokens growing, so
// that legitimate holders are not refused: they buy availability.
type redlockFence struct{ *redlock }

func (r redlockFence) acquire(ctx context.Context, at gap, k keys, value string, ttl time.Duration) (grant, error) {
	return r.fencedTake(ctx, at, k, value, ttl, acquireFenced, []string{value, ms(ttl)})
}

// fencedTake is steps 1 to 5 of redlock's acquire with s in place of SET NX
// PX, a script that takes the lock and draws a token on each node, and one
// step more: the largest token of the quorum is written back before the
// lease is used.
func (r redlockFence) fencedTake(ctx context.Context, at gap, k keys, value string, ttl time.Duration, s script, args []string) (grant, error) {
	start := time.Now()
	// A yes is decided only once the first node has answered too: lua+fence
	// draws from that node's counter alone, and only its answer makes this
	// token pass it.
	drawn := r.ask(ctx, func(n instance, reply func(answer)) { n.eval(ctx, s, []string{k.lock, k.fence}, args, reply) },
		func(votes []vote) bool { return r.decided(votes) && (votes[0].heard || !r.won(votes)) })
	if err := at(ctx, AfterAcquireStep1); err != nil {
		return grant{}, err
	}
	if _, err := r.enough("acquire", k, value, start, ttl, drawn); err != nil {
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
	written := r.ask(ctx, func(n instance, reply func(answer)) {
		n.eval(ctx, raiseFence, []string{k.lock, k.fence}, []string{value, strconv.FormatUint(token, 10)}, reply)
	}, r.decided)
	validity, err := r.enough("acquire", k, value, start, ttl, written)
	if err != nil {
		return grant{}, err
	}
	return grant{validity: validity, token: token}, nil
}

// won reports whether a quorum of nodes that count said yes.
func (r *redlock) won(votes []vote) bool {
	yes, _ := count(votes)
	return yes >= r.quorum()
}
