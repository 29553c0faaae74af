package lock

import (
	"context"
	"fmt"
	"time"

	"flashsale/lock/internal/node"
)

// Redlock's bookkeeping (redlock): one round of a command
// sent to every node, the votes it gathers, the quorum, and the validity.

// vote is one node's answer as Redlock counts it: heard (or given up on),
// yes or no, the number it answered, and whether its incarnation may vote
// (restart awareness, internal/node).
type vote struct {
	n      *node.Node
	heard  bool
	yes    bool
	counts bool
	num    int64
	err    error
}

// quorumRule says when a round is settled: yes votes that count, with the first
// node heard from too if first, or so many no votes (and failures) that yes
// is out of reach.
type quorumRule struct {
	yes   int
	first bool
}

// majority is the usual rule: a quorum of yes, or a quorum out of reach.
func (r *redlock) majority() quorumRule { return quorumRule{yes: r.quorum()} }

func (e quorumRule) settled(votes []vote) bool {
	yes, no := counted(votes)
	return (yes >= e.yes && (!e.first || votes[0].heard)) || no > len(votes)-e.yes
}

// counted counts the nodes heard from: yes votes that count, and the rest.
func counted(votes []vote) (yes, no int) {
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

// reply is one node's answer, by the node's index.
type reply struct {
	i int
	node.Answer
}

// ask sends c to every node and gathers the votes until need decides. A
// first node that has owed an answer for a per-node timeout and sent
// nothing (node.Node.Silent: frozen, cut off) is not waited for even if
// need asks for it: the round would give up on it all the same, a timeout
// or a late window later, at every try.
func (r *redlock) ask(ctx context.Context, c node.Command, need quorumRule) []vote {
	if need.first && r.nodes[0].Silent() {
		need.first = false
	}
	return r.gather(ctx, r.send(ctx, c), need)
}

// send sends c to every node at once, each on its own pipelined connection
// (node.Send), and returns where their answers arrive.
func (r *redlock) send(ctx context.Context, c node.Command) <-chan reply {
	replies := make(chan reply, len(r.nodes)) // never blocks a node's reader
	for i, n := range r.nodes {
		n.Send(ctx, c, func(a node.Answer) { replies <- reply{i, a} })
	}
	return replies
}

// gather counts the answers until need says the outcome is known, or the
// per-node timeout passes: a node not heard from by then has failed,
// unless it is answering (below) and only the reading was late; its vote
// is then waited for until the late window from the round's start, so a
// saturated process does not fail tries a majority granted. It costs no
// safety: lease counts the validity from the round's start.
func (r *redlock) gather(ctx context.Context, replies <-chan reply, need quorumRule) []vote {
	start := time.Now()
	votes := make([]vote, len(r.nodes))
	for i, n := range r.nodes {
		votes[i].n = n
	}
	timer := time.NewTimer(r.cfg.nodeTimeout)
	defer timer.Stop()
	for !need.settled(votes) && !allHeard(votes) {
		select {
		case a := <-replies:
			v := &votes[a.i]
			if v.heard {
				continue // given up on at the per-node timeout
			}
			v.heard, v.num, v.err = true, a.N, a.Err
			v.yes = a.Err == nil && a.N > 0
			v.counts = !a.Lost && v.n.Counts(a.Tag, time.Now())
		case <-timer.C:
			timeout := fmt.Errorf("no answer within %v: %w", r.cfg.nodeTimeout, context.DeadlineExceeded)
			// At the per-node timeout, time is left for the answering
			// nodes; when the timer fires again, the late window has passed.
			rest := r.cfg.lateWindow() - time.Since(start)
			if rest <= 0 || !r.giveUpSilent(votes, start, timeout) {
				r.giveUp(votes, start, timeout)
				return votes
			}
			timer.Reset(rest)
		case <-ctx.Done():
			r.giveUp(votes, start, ctx.Err())
			return votes
		}
	}
	return votes
}

// allHeard reports whether every node was heard from (or given up on).
func allHeard(votes []vote) bool {
	for _, v := range votes {
		if !v.heard {
			return false
		}
	}
	return true
}

// giveUpSilent marks failed the nodes not heard from that are not
// answering, and reports whether any node is still waited for: one that
// answers, though its reply has not been read yet.
func (r *redlock) giveUpSilent(votes []vote, start time.Time, err error) (waiting bool) {
	for i := range votes {
		v := &votes[i]
		switch {
		case v.heard:
		case r.answering(v.n, start):
			waiting = true
		default:
			v.heard, v.err = true, r.stale(v.n, start, err)
		}
	}
	return waiting
}

// giveUp marks the nodes not heard from as failed.
func (r *redlock) giveUp(votes []vote, start time.Time, err error) {
	for i := range votes {
		if v := &votes[i]; !v.heard {
			v.heard, v.err = true, r.stale(v.n, start, err)
		}
	}
}

// stale judges a node whose vote was given up on in a round that began at
// start (err says why): if it was answering then (below), the node is up
// and only late (gather waited for it until the late window):
// errNodeLate, which makes the outcome busy, not unavailable. A process too
// busy to read its replies, or even to send its commands, in time must not
// call live nodes down. Otherwise the node failed; its connection is
// dropped if it has not answered anything for a whole TTL (a paused node,
// a cut without a reset), since commands queued behind a dead connection
// would otherwise wait for ever.
func (r *redlock) stale(n *node.Node, start time.Time, err error) error {
	if r.answering(n, start) {
		return fmt.Errorf("%w: %w", errNodeLate, err)
	}
	n.DropIfSilent(r.cfg.ttl)
	return err
}

// answering reports whether n counted as up for a round that began at
// start, though its answer is not read yet: its connection had bytes
// arrive within the late window before the round or since, or has some
// waiting, or owes no reply to anything written to it (the vote is not
// written yet: this process is slow). A connection that owes replies and
// has had nothing arrive for the late window is down, however recently its
// commands were written: that is a frozen node.
func (r *redlock) answering(n *node.Node, start time.Time) bool {
	return n.Answering(start.Add(-r.cfg.lateWindow()))
}

// tally sorts the votes by answer; Granted lists the yes votes that count.
// An acquire short of a quorum may have been decided by refusals before
// the failures came in: a node not waited for whose connection shows it
// down (unheard) is counted failed, so what no quorum could grant is not
// called busy. A release or an extend is left as it was decided: there a
// refusal says the lease is not held, which the watchdog acts on at once.
func (r *redlock) tally(op string, k keys, votes []vote) *QuorumError {
	qe := &QuorumError{Op: op, Key: k.lock, Quorum: r.quorum(), Nodes: len(r.nodes)}
	yes, _ := counted(votes)
	short := op == "acquire" && yes < qe.Quorum
	for _, v := range votes {
		if !v.heard && short {
			v.err = r.unheard(v.n)
		}
		switch {
		case !v.heard && v.err == nil:
			qe.Unheard = append(qe.Unheard, v.n.Addr())
		case v.err != nil: // heard, or not heard and down
			if qe.Failed == nil {
				qe.Failed = map[string]error{}
			}
			qe.Failed[v.n.Addr()] = v.err
		case !v.counts:
			qe.Restarting = append(qe.Restarting, v.n.Addr())
		case v.yes:
			qe.Granted = append(qe.Granted, v.n.Addr())
		default:
			qe.Refused = append(qe.Refused, v.n.Addr())
		}
	}
	return qe
}

// unheard is why a node not waited for is down, judged by its connection
// alone: nil unless its last connection could not be opened, or it has
// owed an answer for a per-node timeout and sent nothing (node.Node.Silent:
// frozen, cut off), which reads as a timeout.
func (r *redlock) unheard(n *node.Node) error {
	if err := n.Unreachable(); err != nil {
		return fmt.Errorf("not waited for: %w", err)
	}
	if n.Silent() {
		return fmt.Errorf("not waited for: nothing heard for %v: %w", r.cfg.nodeTimeout, context.DeadlineExceeded)
	}
	return nil
}

// lease is steps 3 and 4 for a round of votes whose commands were sent at
// start, and the one place a Redlock lease's validity is computed: a
// quorum of nodes that count said yes, and time is left, or else a
// QuorumError that says how each node answered (Late: the quorum came,
// the time did not).
//
// The page counts the validity from now: TTL − elapsed − drift. Here it is
// counted from start, as every rung's grant is (grant): elapsed plus
// that, which ends at the same instant, start + TTL − drift.
func (r *redlock) lease(op string, k keys, votes []vote, start time.Time, ttl time.Duration) (grant, error) {
	qe := r.tally(op, k, votes)
	elapsed := time.Since(start)
	validity := ttl - elapsed - drift(ttl)
	if len(qe.Granted) < r.quorum() || validity <= 0 {
		qe.Late = len(qe.Granted) >= r.quorum()
		return grant{}, qe
	}
	return grant{validity: elapsed + validity}, nil
}
