package lock

import (
	"context"
	"fmt"
	"time"
)

// redlock is the Redlock algorithm of the Redis distlock page ("Distributed
// Locks with Redis", redis.io/docs/latest/develop/use/patterns/distributed-locks/)
// over N independent masters, written as the page's steps, numbered as
// there. It talks to each master through instance, a small interface of
// the two commands it needs: SET NX PX and EVAL of a Lua script. Beneath it
// the commands travel on one pipelined connection per node (pipe.go).
//
// Where it breaks: a node that restarts without its data forgets the locks
// it granted. If a lease held a bare quorum, the restarted node can vote for
// a second client: two holders. The page's answer is the delayed restart,
// which restart.go applies for every client. A holder paused past its
// validity still needs fencing (redlock_fence.go), as for lua.
//
// Where this code differs from the page, each difference marked "Here:"
// where it happens: the nodes are asked at once, not one after another;
// a restarted node's vote does not count; an answer is waited for only
// until the outcome is decided. The page's retry after a failed try, after
// a random delay, is the ladder's wait for every rung (retry.go).
type redlock struct {
	nodes []*node
	cfg   *config
	pipes []instance // the nodes as instances, on their pipelined connections
}

// instance is one Redis master as Redlock talks to it. Each call sends its
// command now and hands the node's answer to reply later, from another
// goroutine; reply must not block.
type instance interface {
	// setNX sends SET key value NX PX ttl: answer 1 if set, 0 if taken.
	setNX(ctx context.Context, key, value string, ttl time.Duration, reply func(answer))
	// eval runs one of the Lua scripts (scripts.go): answer its integer.
	eval(ctx context.Context, s script, keys []string, args []string, reply func(answer))
}

// answer is one node's reply to one command.
type answer struct {
	n   int64  // 1 for a SET that set, else what the script returned
	inc string // the incarnation (run_id) that ran it, if the transport can tell
	err error  // no answer came
}

// drift allows for clock drift between the nodes: 1% of the TTL plus 2 ms,
// as the page suggests.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// quorum is a majority of the nodes: N/2+1.
func (r *redlock) quorum() int { return len(r.nodes)/2 + 1 }

func (r *redlock) acquire(ctx context.Context, at gap, k keys, value string, ttl time.Duration) (grant, error) {
	// 1. Get the current time.
	start := time.Now()

	// 2. Try to acquire the lock in all N instances, with the same key and
	// the same random value, each under a timeout that is small against the
	// TTL, so that a node that is down is given up on quickly.
	// Here: at once, not one after another (the page allows it), and only
	// until the outcome is decided; the other nodes get their SET all the
	// same. A node that restarted within the sit-out does not count
	// (restart.go).
	votes := r.ask(ctx, func(n instance, reply func(answer)) { n.setNX(ctx, k.lock, value, ttl, reply) }, r.decided)
	if err := at(ctx, AfterAcquireStep1); err != nil {
		return grant{}, err
	}

	// 3. The lock is acquired if a majority of the instances granted it and
	// less time than the TTL has passed. 4. Its validity is the TTL minus
	// the time that passed, minus the clock drift. 5. Otherwise, unlock
	// every instance, even those that seemed not to grant it.
	validity, err := r.enough("acquire", k, value, start, ttl, votes)
	if err != nil {
		return grant{}, err
	}
	return grant{validity: validity}, nil
}

// enough is steps 3 to 5: the validity left if a quorum of nodes that count
// said yes and time is left, else the lock given back on every node and a
// QuorumError that says how each node answered.
func (r *redlock) enough(op string, k keys, value string, start time.Time, ttl time.Duration, votes []vote) (time.Duration, error) {
	qe := r.tally(op, k, votes)
	validity := ttl - time.Since(start) - drift(ttl)
	if len(qe.Granted) < r.quorum() || validity <= 0 {
		qe.Late = len(qe.Granted) >= r.quorum()
		r.unlock(k, value)
		return 0, qe
	}
	return validity, nil
}

// release deletes our value on every node ("release the lock in all
// instances, whether or not the client believes it was able to lock a given
// instance") with the compare-and-delete script, and reports ErrNotHeld
// unless a quorum still held it.
func (r *redlock) release(ctx context.Context, _ gap, k keys, value string) error {
	votes := r.ask(ctx, func(n instance, reply func(answer)) {
		n.eval(ctx, compareAndDelete, []string{k.lock}, []string{value}, reply)
	}, r.decided)
	if qe := r.tally("release", k, votes); len(qe.Granted) < r.quorum() {
		return qe
	}
	return nil
}

// handOver is the release and the next acquire fused, used only by the
// speed layer when a waiter of this same process is next (lua.go says why
// it is as safe as the two): on each node the key passes from the holder's
// value to the next holder's in one script, and the new lease counts as an
// acquire does, steps 1 to 5, from when the scripts were sent.
func (r *redlock) handOver(ctx context.Context, k keys, from, to string, ttl time.Duration) (grant, error) {
	start := time.Now()
	votes := r.ask(ctx, func(n instance, reply func(answer)) {
		n.eval(ctx, passLease, []string{k.lock}, []string{from, to, ms(ttl)}, reply)
	}, r.decided)
	validity, err := r.enough("acquire", k, to, start, ttl, votes)
	if err != nil {
		return grant{}, err
	}
	return grant{validity: validity}, nil
}

// extend renews the lease on every node with the compare-and-pexpire
// script: a quorum must renew it, and the validity is counted again as in
// steps 3 and 4.
func (r *redlock) extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error) {
	start := time.Now()
	votes := r.ask(ctx, func(n instance, reply func(answer)) {
		n.eval(ctx, compareAndPexpire, []string{k.lock}, []string{value, ms(ttl)}, reply)
	}, r.decided)
	qe := r.tally("extend", k, votes)
	validity := ttl - time.Since(start) - drift(ttl)
	if len(qe.Granted) < r.quorum() || validity <= 0 {
		qe.Late = len(qe.Granted) >= r.quorum()
		return 0, qe
	}
	return validity, nil
}

// unlock deletes our value on every node after a failed try, without
// waiting for the answers: a caller that gave up must not stop it.
func (r *redlock) unlock(k keys, value string) {
	for _, n := range r.instances() {
		n.eval(context.Background(), compareAndDelete, []string{k.lock}, []string{value}, func(answer) {})
	}
}

// vote is one node's answer as Redlock counts it: heard (or given up on),
// yes or no, the number it answered, and whether its incarnation may vote.
type vote struct {
	n      *node
	heard  bool
	yes    bool
	counts bool
	num    int64
	err    error
}

// ask sends one command to every node at once and gathers the answers
// until decided says the outcome is known, or the per-node timeout passes:
// a node not heard from by then has failed.
func (r *redlock) ask(ctx context.Context, send func(instance, func(answer)), decided func([]vote) bool) []vote {
	type reply struct {
		i int
		answer
	}
	replies := make(chan reply, len(r.nodes)) // never blocks a node's reader
	for i, n := range r.instances() {
		send(n, func(a answer) { replies <- reply{i, a} })
	}
	votes := make([]vote, len(r.nodes))
	for i, n := range r.nodes {
		votes[i].n = n
	}
	timer := time.NewTimer(r.cfg.nodeTimeout)
	defer timer.Stop()
	for heard := 0; heard < len(r.nodes) && !decided(votes); heard++ {
		select {
		case a := <-replies:
			v := &votes[a.i]
			v.heard, v.num, v.err = true, a.n, a.err
			v.yes = a.err == nil && a.n > 0
			v.counts = v.n.counts(a.inc, time.Now())
		case <-timer.C:
			r.giveUp(votes, fmt.Errorf("no answer within %v: %w", r.cfg.nodeTimeout, context.DeadlineExceeded))
			return votes
		case <-ctx.Done():
			r.giveUp(votes, ctx.Err())
			return votes
		}
	}
	return votes
}

// decided: a quorum said yes, or so many said no (or failed) that a quorum
// is out of reach.
func (r *redlock) decided(votes []vote) bool {
	yes, no := count(votes)
	return yes >= r.quorum() || no > len(r.nodes)-r.quorum()
}

// count counts the nodes heard from: yes votes that count, and the rest.
func count(votes []vote) (yes, no int) {
	for _, v := range votes {
		switch {
		case !v.heard:
		case v.yes && v.counts:
			yes++
		default:
			no++
		}
	}
	return yes, no
}

// giveUp marks the nodes not heard from as failed.
func (r *redlock) giveUp(votes []vote, err error) {
	for i := range votes {
		if v := &votes[i]; !v.heard {
			v.heard, v.err = true, r.stale(v.n, err)
		}
	}
}

// tally sorts the votes by answer; Granted lists the yes votes that count.
func (r *redlock) tally(op string, k keys, votes []vote) *QuorumError {
	qe := &QuorumError{Op: op, Key: k.lock, Quorum: r.quorum(), Nodes: len(r.nodes)}
	for _, v := range votes {
		switch {
		case !v.heard:
			qe.Unheard = append(qe.Unheard, v.n.addr)
		case v.err != nil:
			if qe.Failed == nil {
				qe.Failed = map[string]error{}
			}
			qe.Failed[v.n.addr] = v.err
		case !v.counts:
			qe.Restarting = append(qe.Restarting, v.n.addr)
		case v.yes:
			qe.Granted = append(qe.Granted, v.n.addr)
		default:
			qe.Refused = append(qe.Refused, v.n.addr)
		}
	}
	return qe
}

// checksOwner: the release is a compare-and-delete script on every node.
func (*redlock) checksOwner() {}

// checksValidity: a lease is handed over only while validity = ttl − elapsed
// − drift is left.
func (*redlock) checksValidity() {}
