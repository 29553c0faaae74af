package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"flashsale/lock/internal/wire"
)

// redlock is the Redlock algorithm of the Redis documentation over N
// independent masters: SET k v NX PX ttl on all of them at once, with a
// short per-node timeout; the lock is ours if a quorum (N/2+1) granted it and
// time is left: validity = ttl − elapsed − drift. A failed try releases on
// every node. Release and extend use the same Lua scripts as lua, on every
// node; extend needs a quorum too. Each call returns as soon as its outcome
// is decided (a quorum said yes, or a quorum is out of reach; for a release,
// one node deleted our value): the other nodes' commands are already on
// their connections, in order (internal/wire).
//
// Where it breaks: a node that restarts without its data forgets the locks it
// granted. If a lease held a bare quorum, the restarted node can vote for a
// second client: two holders. Restart awareness (restart.go: a node whose
// uptime is below TTL + drift does not vote, and its fencing counters are
// re-seeded from the others first) closes that; a holder paused past its TTL
// still needs fencing.
type redlock struct {
	nodes []*node
	cfg   *config
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
	want    wire.Shape // the replies that fit cmd
	read    func(reply any) (ok bool, token uint64, err error)
	decided func(granted, against int) bool
	// first: a yes is decided only once the first node has answered too.
	first bool
	sent  func() // if set, called once the command is queued on every node
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
		n.pipe.Send(a.cmd, a.want, func(v any, err error) { answers <- answer{i, v, err} })
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
		if a.decided != nil && a.decided(granted, against) && (!a.first || votes[0].heard || granted < r.quorum()) {
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
			if v.ok && v.n.counts(time.Now()) {
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
			v.n.pipe.Stale(r.cfg.ttl)
		}
	}
}

// tally counts the votes of nodes allowed to count now (restart.go).
func (r *redlock) tally(op string, k keys, votes []vote) (counted []vote, qe *QuorumError) {
	now := time.Now()
	qe = &QuorumError{Op: op, Key: k.lock, Quorum: r.quorum(), Nodes: len(r.nodes)}
	for _, v := range votes {
		switch {
		case !v.heard:
			qe.Unheard = append(qe.Unheard, v.n.addr)
		case v.err != nil:
			if qe.Failed == nil {
				qe.Failed = map[string]error{}
			}
			qe.Failed[v.n.addr] = v.err
		case !v.n.counts(now):
			qe.Restarting = append(qe.Restarting, v.n.addr)
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
	_, validity, err := r.take(ctx, at, k, value, start, ttl,
		ask{cmd: []string{"SET", k.lock, value, "NX", "PX", ms}, want: wire.OKOrNil, read: readSet, decided: r.wins})
	if err != nil {
		return grant{}, err
	}
	return grant{validity: validity}, nil
}

// take asks every node at once, then holds the gap after the first acquire
// step, then counts: the lease is ours if a quorum of nodes that may vote
// granted it and validity = ttl − elapsed − drift is left. A failed try
// deletes our value everywhere.
func (r *redlock) take(ctx context.Context, at gap, k keys, value string, start time.Time, ttl time.Duration, a ask) (granted []vote, validity time.Duration, err error) {
	votes := r.poll(ctx, a)
	if err := at(ctx, AfterAcquireStep1); err != nil {
		return nil, 0, err
	}
	return r.hold(k, value, start, ttl, votes)
}

// hold counts the votes of a step of an acquire and the validity left; short
// of a quorum, or of time, it gives the lock back on every node.
func (r *redlock) hold(k keys, value string, start time.Time, ttl time.Duration, votes []vote) ([]vote, time.Duration, error) {
	counted, qe := r.tally("acquire", k, votes)
	validity := ttl - time.Since(start) - drift(ttl)
	if len(counted) < r.quorum() || validity <= 0 {
		qe.Late = len(counted) >= r.quorum()
		r.unlock(k, value)
		return nil, 0, qe
	}
	return counted, validity, nil
}

// readSet reads SET … NX: OK if granted, nil if the key is taken.
func readSet(v any) (bool, uint64, error) {
	ok, err := wire.OK(v)
	return ok, 0, err
}

// readFlag reads a script's 1 (done) or 0 (not ours).
func readFlag(v any) (bool, uint64, error) {
	n, err := wire.Int(v)
	return n == 1, 0, err
}

// unlock deletes our value everywhere after a failed try. Nobody waits for
// the answers: the deletes are queued behind the SETs they undo on each
// node's connection, so they cannot arrive first, even at a node that has
// not answered yet.
func (r *redlock) unlock(k keys, value string) {
	cmd := compareAndDelete.eval([]string{k.lock}, value)
	for _, n := range r.nodes {
		n.pipe.Send(cmd, wire.Integer, func(any, error) {})
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
	votes := r.poll(ctx, ask{cmd: compareAndDelete.eval([]string{k.lock}, value), want: wire.Integer, read: readFlag, decided: decided, sent: queued})
	if counted, qe := r.tally("release", k, votes); len(counted) < need {
		return qe
	}
	return nil
}

func (r *redlock) extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error) {
	start := time.Now()
	votes := r.poll(ctx, ask{cmd: compareAndPexpire.eval([]string{k.lock}, value, strconv.FormatInt(ttl.Milliseconds(), 10)),
		want: wire.Integer, read: readFlag, decided: r.wins})
	counted, qe := r.tally("extend", k, votes)
	validity := ttl - time.Since(start) - drift(ttl)
	if len(counted) < r.quorum() || validity <= 0 {
		qe.Late = len(counted) >= r.quorum()
		return 0, qe
	}
	return validity, nil
}

// checksOwner: the release is a compare-and-delete script on every node.
func (*redlock) checksOwner() {}

// checksValidity: a lease is handed over only while validity = ttl − elapsed
// − drift is left.
func (*redlock) checksValidity() {}
