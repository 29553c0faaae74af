package lock

import (
	"context"
	"strconv"
	"time"

	"flashsale/lock/internal/node"
)

// RedlockFence is the name of Redlock with fencing tokens.
const RedlockFence = "redlock+fence"

// redlockFence is redlock with fencing tokens across its nodes, this
// project's own answer to "Redlock issues no fencing token". Each node draws
// a token from its own counter atomically with its SET, and the lease's
// token is the largest of its quorum. The next quorum may be other nodes
// whose counters are behind, so the token is written back as max(counter,
// token) to the nodes that drew less, on the same pipelined connection as
// our release and ahead of it: any later quorum meets a node past the token.
//
// Where it breaks: it does not, for the store. A token that went backwards
// (a holder that crashed before its write-back left) is refused by the
// store, which writes only for a token strictly greater than the row's: a
// stale_fence answer and a retry, never a double sale. The write-back and
// the re-seeding of a restarted node buy availability, not safety.
type redlockFence struct{ redlock }

func (r redlockFence) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	return r.fenced(ctx, checkpoint, k, value, ttl, acquireFenced.vote([]string{k.lock, k.fence}, value, ms(ttl)))
}

// fenced is redlock's steps with take in place of SET NX PX: a script that
// takes the lock and draws a token on each node (lua+fence's acquireFenced).
// A yes is decided only once the first node has answered too: lua+fence
// draws from that node's counter alone, and only its answer makes this
// token pass it. And one step more, which costs no round trip: the token is
// written back before the lease is used.
func (r redlockFence) fenced(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration, take node.Command) (grant, error) {
	g, drawn, err := r.steps(ctx, checkpoint, k, value, ttl, take, need{yes: r.quorum, first: true})
	if err != nil {
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

// writeBack sends raise to n after wait, and again, every 20 ms, while the
// connection it went out on broke before the answer, until until: a lost
// write-back would leave the counter behind, each later holder whose quorum
// meets ours only there refused in turn. Sent again, it costs one refusal at
// most.
func writeBack(n *node.Node, raise node.Command, until time.Time, wait time.Duration) {
	n.Send(context.Background(), raise, func(a node.Answer) {
		if a.Err != nil && time.Now().Before(until) {
			time.AfterFunc(wait, func() { writeBack(n, raise, until, 20*time.Millisecond) })
		}
	})
}
