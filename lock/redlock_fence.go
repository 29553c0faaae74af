package lock

import (
	"context"
	"strconv"
	"time"

	"flashsale/internal/fault"
	"flashsale/lock/internal/node"
)

// redlockFence is redlock with fencing tokens across its nodes:
// this project's own answer to "Redlock issues no fencing token", not a
// standard recipe. Each node draws a token from its own counter atomically
// with its SET, and the lease's token is the largest of its quorum. That is
// not enough by itself: the next quorum may be other nodes whose counters
// are behind. So the token is written back as max(counter, token) to the
// nodes of the quorum that drew less, sent right after the grant and not
// waited for: on each node it travels on the same pipelined connection as
// our release, ahead of it, so every node of the quorum has its counter
// past the token before it frees the key for the next holder, and any
// later quorum meets one of them. A node restarted without its data is
// re-seeded from the others before it votes (internal/node). Release and
// extend are redlock's.
//
// What makes it safe is the store, not the counters: the store registers a
// token on the row only if it is strictly greater than the one there, and
// writes only where the row still carries it, so a token that went
// backwards (a holder that crashed before its write-back left, a lease that
// ran out on a node the write-back had not reached) is refused: a
// stale_fence answer and a retry, never a double sale. The write-back and
// the re-seeding buy availability; docs/design.md ("One round trip for a
// fenced Redlock lease") gives the cases.
type redlockFence struct{ *redlock }

func (r redlockFence) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	return r.fenced(ctx, checkpoint, k, value, ttl, acquireFenced.vote([]string{k.lock, k.fence}, value, ms(ttl)))
}

// fenced is redlock's acquire, steps 1 to 5, with take in place of SET NX
// PX: a script that takes the lock and draws a token on each node
// (acquireFenced, lua+fence's). And one step more, which costs no round
// trip: the token is written back before the lease is used.
func (r redlockFence) fenced(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration, take node.Command) (grant, error) {
	start := time.Now()
	// A yes is decided only once the first node has answered too: lua+fence
	// draws from that node's counter alone, and only its answer makes this
	// token pass it.
	drawn := r.ask(ctx, take, quorumRule{yes: r.quorum(), first: true})
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return grant{}, err
	}
	g, err := r.lease("acquire", k, drawn, start, ttl)
	if err != nil {
		r.unlock(k, value)
		return grant{}, err
	}
	for _, v := range drawn {
		if v.yes && v.counts {
			g.token = max(g.token, uint64(v.num))
		}
	}
	// The write-back, to each node of the quorum whose counter is behind
	// the token: queued before the lease is handed to the caller, so it is
	// ahead of our release on that node's connection. Not waited for, and
	// not undone by a caller that gives up.
	raise := raiseFence.call([]string{k.fence}, strconv.FormatUint(g.token, 10))
	for _, v := range drawn {
		if v.yes && v.counts && uint64(v.num) < g.token {
			writeBack(v.n, raise, time.Now().Add(2*ttl), 0)
		}
	}
	return g, nil
}

// raiseFence writes a token back as max(counter, token), restart
// awareness's raise-to-max script. It needs no lease: a counter that only
// grows can make a later token larger, never smaller. KEYS[1] fence
// counter; ARGV[1] token. Returns the counter.
var raiseFence = newScript(node.RaiseToMax)

// writeBack sends raise to n after wait, and again on the next connection
// while the one it went out on broke before it was answered (at once the
// first time, then every 20 ms, so a node that is down costs no spin), until
// until:
// a write-back lost with its connection would leave the counter behind
// for every later holder whose quorum meets ours only there, each refused
// in turn until the counters caught up. Sent again, it lands before or
// just after the release that went out on the new connection, so the gap
// costs one refusal at most.
func writeBack(n *node.Node, raise node.Command, until time.Time, wait time.Duration) {
	n.Send(context.Background(), raise, func(a node.Answer) {
		if a.Err != nil && time.Now().Before(until) {
			time.AfterFunc(wait, func() { writeBack(n, raise, until, 20*time.Millisecond) })
		}
	})
}
