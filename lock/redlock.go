package lock

import (
	"context"
	"time"

	"flashsale/internal/fault"
	"flashsale/lock/internal/node"
)

// Redlock is the name of Redlock over every node.
const Redlock = "redlock"

// redlock is the Redlock algorithm of the Redis distlock page ("Distributed
// Locks with Redis", redis.io/docs/latest/develop/use/patterns/distributed-locks/)
// over N independent masters, written as the page's steps, numbered as
// there. One round (voters.round) sends a command to every node and counts
// the votes, for acquire, extend, release and hand-over alike.
//
// Where it breaks: a node that restarts without its data forgets the locks
// it granted. If a lease held a bare quorum, the restarted node can vote for
// a second client: two holders. The page's answer is the delayed restart,
// which restart awareness applies for every client. A holder paused past
// its validity still needs fencing (redlockFence), as for lua.
//
// Where this code differs from the page, each difference is marked "Here:".
type redlock struct{ *voters }

func (r redlock) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	setNX := node.Command{Args: []string{"SET", k.lock, value, "NX", "PX", ms(ttl)}, Set: true, Grants: true}
	g, _, err := r.steps(ctx, checkpoint, k, value, ttl, setNX, need{yes: r.quorum})
	return g, err
}

// steps are the page's steps 1 to 5 with take as the vote each node is
// asked for: SET NX PX for an acquire, a script for a fenced acquire or a
// hand-over. It returns the grant and the votes it was counted from.
func (r redlock) steps(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration, take node.Command, want need) (grant, []vote, error) {
	// 1. Get the current time.
	start := time.Now()

	// 2. Try to acquire the lock in all N instances, with the same key and
	// the same random value, each under a timeout that is small against the
	// TTL (Options.NodeTimeout), so that a node that is down is given up on
	// quickly.
	// Here: all at once (the page allows it), and only until the outcome is
	// decided; a node that answers but whose reply was read late (a busy
	// process) is waited for a little longer, and that time is counted too.
	votes := r.round(ctx, take, want, nil)
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return grant{}, nil, err
	}

	// 3. The lock is acquired if a majority of the instances granted it and
	// less time than the TTL has passed since step 1.
	// Here: a node that restarted within the sit-out does not count
	// (restart awareness).
	// 4. Its validity is the TTL minus the time that passed, minus the
	// clock drift.
	g, err := r.lease("acquire", k, votes, start, ttl)
	if err != nil {
		// 5. Otherwise, unlock every instance, even those that seemed not
		// to grant it, and try again after a random delay.
		// Here: the retry is every rung's wait (Locker.Acquire).
		r.unlock(k, value)
		return grant{}, nil, err
	}
	return g, votes, nil
}

// lease is steps 3 and 4 for a round whose commands were sent at start, the
// one place a Redlock lease's validity is computed: a quorum of nodes that
// count said yes and time is left, or else a QuorumError that says how each
// node answered (Late: the quorum came, the time did not).
// Here: the page counts the validity from now, TTL − elapsed − drift; a
// grant counts it from start, elapsed more, which ends at the same instant.
func (r redlock) lease(op string, k keys, votes []vote, start time.Time, ttl time.Duration) (grant, error) {
	yes, _, _ := countVotes(votes)
	elapsed := time.Since(start)
	validity := ttl - elapsed - drift(ttl)
	if yes < r.quorum || validity <= 0 {
		qe := r.tally(op, k, votes)
		qe.Late = len(qe.Granted) >= r.quorum
		return grant{}, qe
	}
	return grant{validity: elapsed + validity}, nil
}

// drift is the allowance for clock drift between processes.
// Here: the page asks only for "a few milliseconds"; this is the formula of
// the reference implementations (redlock-rb, node-redlock, redlock-py): 1%
// of the TTL plus 2 ms, the 2 ms for Redis's millisecond precision of expiry.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// unlock deletes value on every node after a failed try, without waiting
// for the answers: a caller that gave up must not stop it.
func (q *voters) unlock(k keys, value string) {
	c := compareAndDelete.call([]string{k.lock}, value)
	for _, n := range q.nodes {
		n.Send(context.Background(), c, func(node.Answer) {})
	}
}

// release deletes our value on every node ("release the lock in all
// instances, whether or not the client believes it was able to lock a given
// instance") with lua's compare-and-delete, and reports ErrNotHeld unless a
// quorum still held it.
func (r redlock) release(ctx context.Context, _ faultPoints, k keys, value string) error {
	return r.releaseThen(ctx, k, value, false, nil)
}

// releaseThen is release, calling queued (if set) as soon as every delete
// is on its node's pipelined connection: an acquire this process sends after
// that reaches each node behind our delete, so the speed layer may let the
// next waiter here go at once. A lease still valid is held by a quorum
// (that is what the validity means), so one node that deleted our value
// confirms its release; past its validity only a quorum does.
func (r redlock) releaseThen(ctx context.Context, k keys, value string, valid bool, queued func()) error {
	want := need{yes: r.quorum}
	if valid {
		want.yes = 1
	}
	votes := r.round(ctx, compareAndDelete.call([]string{k.lock}, value), want, queued)
	if yes, _, _ := countVotes(votes); yes < want.yes {
		return r.tally("release", k, votes)
	}
	return nil
}

// extend renews the lease on every node with lua's compare-and-pexpire: it
// holds, as the page says, only if a majority renewed it within the
// validity, counted as in steps 3 and 4.
func (r redlock) extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error) {
	start := time.Now()
	votes := r.round(ctx, compareAndPexpire.vote([]string{k.lock}, value, ms(ttl)), need{yes: r.quorum}, nil)
	g, err := r.lease("extend", k, votes, start, ttl)
	return g.validity, err
}

// sitOut is how long a node whose data lost keys stays out, for a largest
// TTL in use of ttl: the page's delayed restart, a TTL plus the drift.
func sitOut(ttl time.Duration) time.Duration { return ttl + drift(ttl) }

// MinUptime is the uptime a node must report (INFO uptime_in_seconds) before
// it may vote in a Redlock whose largest TTL is ttl: the sit-out, plus the
// second by which a whole-second uptime can overstate the real one.
func MinUptime(ttl time.Duration) time.Duration { return sitOut(ttl) + time.Second }
