package lock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redlock is the Redlock algorithm of the Redis documentation over N
// independent masters: SET k v NX PX ttl on all of them at once, with a
// short per-node timeout; the lock is ours if a quorum (N/2+1) granted it and
// time is left: validity = ttl − elapsed − drift. A failed try releases on
// every node. Release and extend use the same Lua scripts as lua, on every
// node; extend needs a quorum too. Each call returns as soon as its outcome
// is decided (a quorum said yes, or a quorum is out of reach; for a release,
// one node deleted our value): the other nodes' commands are already on
// their connections, in order (pipe.go). A fenced acquire waits for all.
//
// With fenced set (redlock+fence), every node draws a token from its own
// counter atomically with its SET; the lease takes the largest token of its
// quorum and writes it back as max(counter, token) to a majority of nodes
// that still hold the lease, so any later quorum meets a counter past it.
//
// Where it breaks: a node that restarts without its data forgets the locks it
// granted. If a lease held a bare quorum, the restarted node can vote for a
// second client: two holders. Restart awareness (the client ignores a node
// whose run_id changed until the TTL has passed, and re-seeds its fencing
// counters from the others) closes that; a holder paused past its TTL still
// needs fencing.
type redlock struct {
	nodes  []*node
	cfg    *config
	fenced bool
}

// drift allows for clock drift between the nodes: 1% of the TTL plus 2 ms.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

func (r *redlock) quorum() int { return len(r.nodes)/2 + 1 }

// vote is one node's answer: ok if it granted (or renewed, or deleted), with
// the token it drew, or the error that kept it from answering. A node not
// heard from when the outcome was already decided has heard false.
type vote struct {
	n     *node
	heard bool
	ok    bool
	token uint64
	err   error
}

// ask is one command for every node, how to read a node's reply, and when
// the outcome is decided: granted counts the yes votes of nodes that count,
// against everything else heard. A nil decided waits for every node.
type ask struct {
	cmd     []string
	read    func(reply any) (ok bool, token uint64, err error)
	decided func(granted, against int) bool
	sent    func() // if set, called once the command is queued on every node
}

// wins is decided once a quorum said yes, or once so many said no that a
// quorum is out of reach.
func (r *redlock) wins(granted, against int) bool {
	return granted >= r.quorum() || against > len(r.nodes)-r.quorum()
}

// poll sends the command to every node at once and gathers the answers
// until the outcome is decided or the per-node timeout passes; a node that
// has not answered by then counts as failed.
func (r *redlock) poll(ctx context.Context, a ask) []vote {
	type answer struct {
		i   int
		v   any
		err error
	}
	answers := make(chan answer, len(r.nodes)) // never blocks a node's reader
	for i, n := range r.nodes {
		n.pipe.send(a.cmd, func(v any, err error) { answers <- answer{i, v, err} })
	}
	if a.sent != nil {
		a.sent()
	}
	votes := make([]vote, len(r.nodes))
	for i, n := range r.nodes {
		votes[i].n = n
	}
	timer := time.NewTimer(r.cfg.nodeTimeout)
	defer timer.Stop()
	granted, against := 0, 0
	for heard := 0; heard < len(r.nodes); heard++ {
		if a.decided != nil && a.decided(granted, against) {
			break
		}
		select {
		case ans := <-answers:
			v := &votes[ans.i]
			v.heard, v.err = true, ans.err
			if v.err == nil {
				v.ok, v.token, v.err = a.read(ans.v)
			}
			v.ok = v.ok && v.err == nil
			if counts, _ := v.n.state(time.Now()); counts && v.ok {
				granted++
			} else {
				against++
			}
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

// giveUp marks the nodes not heard from as failed, and drops the connection
// of one that has not answered anything for a whole TTL.
func (r *redlock) giveUp(votes []vote, err error) {
	for i := range votes {
		if v := &votes[i]; !v.heard {
			v.heard, v.err = true, err
			v.n.pipe.stale(r.cfg.ttl)
		}
	}
}

// tally counts the votes of nodes allowed to count now, and starts re-seeding
// a restarted node whose quarantine is over (it counts from the next try).
func (r *redlock) tally(ctx context.Context, op string, k keys, votes []vote) (counted []vote, qe *QuorumError) {
	now := time.Now()
	qe = &QuorumError{Op: op, Key: k.lock, Quorum: r.quorum(), Nodes: len(r.nodes)}
	for _, v := range votes {
		counts, reseed := v.n.state(now)
		if reseed {
			if err := r.reseed(ctx, v.n); err != nil {
				r.cfg.logger.Warn("re-seeding fencing counters failed; node still not counted", "node", v.n.addr, "err", err)
			}
		}
		switch {
		case !counts:
			qe.Restarting = append(qe.Restarting, v.n.addr)
		case !v.heard:
			qe.Unheard = append(qe.Unheard, v.n.addr)
		case v.err != nil:
			if qe.Failed == nil {
				qe.Failed = map[string]error{}
			}
			qe.Failed[v.n.addr] = v.err
		case v.ok:
			qe.Granted = append(qe.Granted, v.n.addr)
			counted = append(counted, v)
		default:
			qe.Refused = append(qe.Refused, v.n.addr)
		}
	}
	return counted, qe
}

func (r *redlock) acquire(ctx context.Context, at gap, k keys, value string, ttl time.Duration) (grant, error) {
	start := time.Now()
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	take := ask{cmd: []string{"SET", k.lock, value, "NX", "PX", ms}, read: readSet, decided: r.wins}
	if r.fenced {
		// Fenced draws wait for every node: lua+fence draws from the first
		// node's counter alone, and only its answer makes the token pass it.
		take = ask{cmd: acquireFenced.eval([]string{k.lock, k.fence}, value, ms), read: readToken}
	}
	votes := r.poll(ctx, take)
	if err := at(ctx, AfterAcquireStep1); err != nil {
		return grant{}, err
	}
	counted, qe := r.tally(ctx, "acquire", k, votes)
	validity := ttl - time.Since(start) - drift(ttl)
	if len(counted) < r.quorum() || validity <= 0 {
		qe.Late = len(counted) >= r.quorum()
		r.unlock(k, value)
		return grant{}, qe
	}
	if !r.fenced {
		return grant{validity: validity}, nil
	}
	var token uint64
	for _, v := range counted {
		token = max(token, v.token)
	}
	written := r.poll(ctx, ask{cmd: raiseFence.eval([]string{k.lock, k.fence}, value, strconv.FormatUint(token, 10)),
		read: readFlag})
	counted, qe = r.tally(ctx, "acquire", k, written)
	validity = ttl - time.Since(start) - drift(ttl)
	if len(counted) < r.quorum() || validity <= 0 {
		qe.Late = len(counted) >= r.quorum()
		r.unlock(k, value)
		return grant{}, qe
	}
	return grant{validity: validity, token: token}, nil
}

// readSet reads SET … NX: OK if granted, nil if the key is taken.
func readSet(v any) (bool, uint64, error) {
	ok, err := replyOK(v)
	return ok, 0, err
}

// readToken reads acquireFenced: the token drawn, or 0 if the key is taken.
func readToken(v any) (bool, uint64, error) {
	token, err := replyInt(v)
	return token > 0, uint64(token), err
}

// readFlag reads a script's 1 (done) or 0 (not ours).
func readFlag(v any) (bool, uint64, error) {
	n, err := replyInt(v)
	return n == 1, 0, err
}

// unlock deletes our value everywhere after a failed try. Nobody waits for
// the answers: the deletes are queued behind the SETs they undo on each
// node's connection, so they cannot arrive first, even at a node that has
// not answered yet.
func (r *redlock) unlock(k keys, value string) {
	cmd := compareAndDelete.eval([]string{k.lock}, value)
	for _, n := range r.nodes {
		n.pipe.send(cmd, func(any, error) {})
	}
}

func (r *redlock) release(ctx context.Context, _ gap, k keys, value string) error {
	return r.releaseThen(ctx, k, value, false, nil)
}

// releaseThen deletes our value on every node, and calls queued (if set) as
// soon as every delete is on its node's connection: an acquire sent from
// this process after that reaches each node behind our delete.
//
// A release reports ErrNotHeld if the lease had run out. Inside its validity
// a lease is held by a quorum (that is what the validity means), so one node
// that deleted our value confirms it; past its validity only a quorum of
// deletes does. The other deletes are queued all the same.
func (r *redlock) releaseThen(ctx context.Context, k keys, value string, valid bool, queued func()) error {
	decided, need := r.wins, r.quorum()
	if valid {
		decided, need = func(granted, against int) bool { return granted >= 1 || against == len(r.nodes) }, 1
	}
	votes := r.poll(ctx, ask{cmd: compareAndDelete.eval([]string{k.lock}, value), read: readFlag, decided: decided, sent: queued})
	if counted, qe := r.tally(ctx, "release", k, votes); len(counted) < need {
		return qe
	}
	return nil
}

func (r *redlock) extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error) {
	start := time.Now()
	votes := r.poll(ctx, ask{cmd: compareAndPexpire.eval([]string{k.lock}, value, strconv.FormatInt(ttl.Milliseconds(), 10)),
		read: readFlag, decided: r.wins})
	counted, qe := r.tally(ctx, "extend", k, votes)
	validity := ttl - time.Since(start) - drift(ttl)
	if len(counted) < r.quorum() || validity <= 0 {
		qe.Late = len(counted) >= r.quorum()
		return 0, qe
	}
	return validity, nil
}

// reseed raises a restarted node's fencing counters to the largest value a
// majority of the other nodes hold, so its tokens cannot go backwards. Any
// token issued before the restart was written back to a quorum; the N−quorum+1
// other nodes read here always include one of that quorum.
func (r *redlock) reseed(ctx context.Context, target *node) error {
	target.reseedMu.Lock()
	defer target.reseedMu.Unlock()
	if _, need := target.state(time.Now()); !need {
		return nil
	}
	var others []*node
	for _, n := range r.nodes {
		if n != target {
			others = append(others, n)
		}
	}
	var mu sync.Mutex
	highest := map[string]uint64{}
	errs := forEachNode(ctx, others, 10*r.cfg.nodeTimeout, func(ctx context.Context, n *node) error {
		counters, err := readCounters(ctx, n.rdb, r.cfg.namespace+"fence:*")
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for key, c := range counters {
			highest[key] = max(highest[key], c)
		}
		return nil
	})
	answered := 0
	for _, err := range errs {
		if err == nil {
			answered++
		}
	}
	if need := len(r.nodes) - r.quorum() + 1; answered < need {
		return fmt.Errorf("only %d of the %d other nodes answered, %d needed: %w", answered, len(others), need, errors.Join(errs...))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*r.cfg.nodeTimeout)
	defer cancel()
	pipe := target.rdb.Pipeline()
	for key, c := range highest {
		reseedFence.Eval(ctx, pipe, []string{key}, c)
	}
	if len(highest) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("node %s: %w", target.addr, err)
		}
	}
	target.mu.Lock()
	target.reseed = false
	target.mu.Unlock()
	r.cfg.logger.Info("fencing counters re-seeded; node counts again", "node", target.addr, "counters", len(highest))
	return nil
}

// readCounters reads every fencing counter matching pattern on one node.
func readCounters(ctx context.Context, rdb *redis.Client, pattern string) (map[string]uint64, error) {
	out := map[string]uint64{}
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		c, err := rdb.Get(ctx, iter.Val()).Uint64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		out[iter.Val()] = c
	}
	return out, iter.Err()
}

// QuorumError says how every Redis node answered a Redlock operation that did
// not reach a quorum. It matches ErrUnavailable when too many nodes failed
// (or are still restarting) for any quorum to be possible, else
// ErrNotAcquired for an acquire and ErrNotHeld for a release or extend.
type QuorumError struct {
	Op         string           // "acquire", "release" or "extend"
	Key        string           // the lock key
	Quorum     int              // votes needed
	Nodes      int              // nodes in all
	Granted    []string         // nodes that said yes
	Refused    []string         // nodes that answered no (held by another)
	Failed     map[string]error // nodes that did not answer in time, and why
	Restarting []string         // nodes that restarted and do not count yet
	Unheard    []string         // nodes whose answer was not needed to decide
	Late       bool             // a quorum said yes, but the validity was used up
}

func (e *QuorumError) unavailable() bool {
	return len(e.Failed)+len(e.Restarting) > e.Nodes-e.Quorum
}

// Error lists the nodes by answer.
func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock %s %s: %d of %d nodes granted, %d needed", e.Op, e.Key, len(e.Granted), e.Nodes, e.Quorum)
	if e.Late {
		b.WriteString(", but too late: validity used up")
	}
	if len(e.Refused) > 0 {
		fmt.Fprintf(&b, "; refused by %s", strings.Join(e.Refused, ", "))
	}
	if len(e.Unheard) > 0 {
		fmt.Fprintf(&b, "; not waited for: %s", strings.Join(e.Unheard, ", "))
	}
	if len(e.Restarting) > 0 {
		fmt.Fprintf(&b, "; restarted, not counted yet: %s", strings.Join(e.Restarting, ", "))
	}
	if len(e.Failed) > 0 {
		addrs := make([]string, 0, len(e.Failed))
		for a := range e.Failed {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		for i, a := range addrs {
			addrs[i] = fmt.Sprintf("%s (%v)", a, e.Failed[a])
		}
		fmt.Fprintf(&b, "; failed: %s", strings.Join(addrs, ", "))
	}
	return b.String()
}

// Unwrap makes errors.Is see ErrUnavailable, ErrNotAcquired or ErrNotHeld.
func (e *QuorumError) Unwrap() error {
	switch {
	case e.unavailable():
		return ErrUnavailable
	case e.Op == "acquire":
		return ErrNotAcquired
	default:
		return ErrNotHeld
	}
}

// checksOwner: the release is a compare-and-delete script on every node.
func (*redlock) checksOwner() {}
