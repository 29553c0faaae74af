package lock

import (
	"context"
	"time"

	"flashsale/internal/fault"
	"flashsale/lock/internal/node"
)

// redlock is the Redlock algorithm of the Redis distlock page ("Distributed
// Locks with Redis", redis.io/docs/latest/develop/use/patterns/distributed-locks/)
// over N independent masters, written as the page's steps, numbered as
// there. Each master is a node (internal/node); the votes, the quorum and
// the validity are counted by redlock.ask and redlock.lease.
//
// Where it breaks: a node that restarts without its data forgets the locks
// it granted. If a lease held a bare quorum, the restarted node can vote for
// a second client: two holders. The page's answer is the delayed restart,
// which restart awareness (internal/node) applies for every client. A
// holder paused past its validity still needs fencing (redlockFence),
// as for lua.
//
// Where this code differs from the page, each difference is marked "Here:"
// where it happens.
type redlock struct {
	nodes []*node.Node
	cfg   *config
}

// quorum is a majority of the nodes: N/2+1.
func (r *redlock) quorum() int { return node.Quorum(len(r.nodes)) }

// drift is the allowance for clock drift between processes. The page asks
// only for "a few milliseconds"; this is the formula of the reference
// implementations (redlock-rb, node-redlock, redlock-py): 1% of the TTL
// plus 2 ms, the 2 ms for Redis's millisecond precision of expiry.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

func (r *redlock) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	// 1. Get the current time.
	start := time.Now()

	// 2. Try to acquire the lock in all N instances, with the same key and
	// the same random value, each under a timeout that is small against the
	// TTL (Options.NodeTimeout), so that a node that is down is given up on
	// quickly.
	// Here: all at once, not one after another (the page allows it), and
	// only until the outcome is decided; the other nodes get their SET all
	// the same. A node that is answering but whose reply was read late (a
	// busy process) is not down: its vote is waited for a little longer
	// (redlock.gather), and counted, as step 3 counts that time too.
	votes := r.ask(ctx, setNX(k.lock, value, ttl), r.majority())
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return grant{}, err
	}

	// 3. The lock is acquired if a majority of the instances granted it and
	// less time than the TTL has passed since step 1.
	// Here: a node that restarted within the sit-out does not count
	// (restart awareness, internal/node).
	// 4. Its validity is the TTL minus the time that passed, minus the
	// clock drift (redlock.lease, the one place it is computed).
	// Here: the drift is the reference implementations' 1% + 2 ms, where
	// the page asks for "a few milliseconds" (drift, above).
	g, err := r.lease("acquire", k, votes, start, ttl)
	if err != nil {
		// 5. Otherwise, unlock every instance, even those that seemed not
		// to grant it, and try again after a random delay.
		// Here: the retry is not Redlock's own but every rung's wait
		// (Locker.retry; with the speed layer on, its wake-ups).
		r.unlock(k, value)
		return grant{}, err
	}
	return g, nil
}

// release deletes our value on every node ("release the lock in all
// instances, whether or not the client believes it was able to lock a given
// instance") with lua's compare-and-delete, and reports ErrNotHeld unless a
// quorum still held it.
func (r *redlock) release(ctx context.Context, _ faultPoints, k keys, value string) error {
	votes := r.ask(ctx, compareAndDelete.call([]string{k.lock}, value), r.majority())
	if qe := r.tally("release", k, votes); len(qe.Granted) < r.quorum() {
		return qe
	}
	return nil
}

// extend renews the lease on every node with lua's compare-and-pexpire: it
// holds, as the page says, only if a majority renewed it within the
// validity, counted as in steps 3 and 4.
func (r *redlock) extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error) {
	start := time.Now()
	votes := r.ask(ctx, compareAndPexpire.vote([]string{k.lock}, value, ms(ttl)), r.majority())
	g, err := r.lease("extend", k, votes, start, ttl)
	return g.validity, err
}

// unlock deletes our value on every node after a failed try, without
// waiting for the answers: a caller that gave up must not stop it.
func (r *redlock) unlock(k keys, value string) {
	r.send(context.Background(), compareAndDelete.call([]string{k.lock}, value))
}
