package lock

import (
	"context"
	"fmt"
	"time"

	"flashsale/lock/internal/node"
)

// voters are the nodes a Redlock asks and how it counts their answers: one
// round serves acquire, extend, release and hand-over alike.
type voters struct {
	nodes  []*node.Node
	cfg    *config
	quorum int // a majority: N/2+1
}

// newVoters is a Redlock's voters: nodes, first node first.
func newVoters(nodes []*node.Node, cfg *config) *voters {
	return &voters{nodes: nodes, cfg: cfg, quorum: node.Quorum(len(nodes))}
}

// vote is one node's answer as a round counts it: heard (or given up on),
// yes or no, the number it answered, and whether its incarnation may vote
// (restart awareness).
type vote struct {
	n      *node.Node
	heard  bool
	yes    bool
	counts bool
	num    int64
	err    error
}

// need says when a round is decided: yes votes that count, with the first
// node's answer among the heard if first; or so many no votes that yes is
// out of reach.
type need struct {
	yes   int
	first bool
}

// reply is one node's answer, by the node's index.
type reply struct {
	i int
	node.Answer
}

// round sends c to every node at once, each on its own pipelined
// connection, calls queued (if set) as soon as c is on every connection, and
// counts the votes until want decides or the per-node timeout passes. A node
// not heard from by then has failed, unless it is answering and only the
// reading was late: it is waited for until the late window, which costs no
// safety since the validity counts from the start. A silent first node is
// not waited for even if want asks for it.
func (q *voters) round(ctx context.Context, c node.Command, want need, queued func()) []vote {
	if want.first && q.nodes[0].Silent() {
		want.first = false
	}
	start := time.Now()
	replies := make(chan reply, len(q.nodes)) // never blocks a node's reader
	votes := make([]vote, len(q.nodes))
	for i, n := range q.nodes {
		votes[i].n = n
		n.Send(ctx, c, func(a node.Answer) { replies <- reply{i, a} })
	}
	if queued != nil {
		queued()
	}
	timer := time.NewTimer(q.cfg.nodeTimeout)
	defer timer.Stop()
	for {
		yes, no, unheard := countVotes(votes)
		if unheard == 0 || (yes >= want.yes && (!want.first || votes[0].heard)) || no > len(votes)-want.yes {
			return votes
		}
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
			// At the per-node timeout, time is left for the answering
			// nodes; when the timer fires again, the late window has passed.
			timeout := fmt.Errorf("no answer within %v: %w", q.cfg.nodeTimeout, context.DeadlineExceeded)
			rest := q.cfg.lateWindow() - time.Since(start)
			if rest <= 0 || !q.giveUp(votes, start, timeout, true) {
				q.giveUp(votes, start, timeout, false)
				return votes
			}
			timer.Reset(rest)
		case <-ctx.Done():
			q.giveUp(votes, start, ctx.Err(), false)
			return votes
		}
	}
}

// countVotes counts the votes: yes votes that count, the other answers (and
// failures), and the nodes not heard from yet.
func countVotes(votes []vote) (yes, no, unheard int) {
	for _, v := range votes {
		switch {
		case !v.heard:
			unheard++
		case v.yes && v.counts:
			yes++
		default:
			no++
		}
	}
	return yes, no, unheard
}

// giveUp marks failed the nodes not heard from in a round that began at
// start (err says why). With spareAnswering it spares a node that is
// answering, though its reply has not been read yet, and reports whether it
// spared any.
func (q *voters) giveUp(votes []vote, start time.Time, err error, spareAnswering bool) (spared bool) {
	for i := range votes {
		v := &votes[i]
		switch {
		case v.heard:
		case spareAnswering && q.upFor(v.n, start):
			spared = true
		default:
			v.heard, v.err = true, q.stale(v.n, start, err)
		}
	}
	return spared
}

// stale judges a node whose vote was given up on: late if it was answering
// (a busy process must not call live nodes down), which reads as busy, not
// unavailable; else failed, its connection dropped if it has answered
// nothing for a whole TTL, since commands queued behind it would wait for
// ever.
func (q *voters) stale(n *node.Node, start time.Time, err error) error {
	if q.upFor(n, start) {
		return fmt.Errorf("%w: %w", errNodeLate, err)
	}
	n.DropIfSilent(q.cfg.ttl)
	return err
}

// upFor reports whether n counted as up for a round that began at start,
// though its answer is not read yet: something arrived on its connection
// within the late window, or it owes no reply.
func (q *voters) upFor(n *node.Node, start time.Time) bool {
	return n.Answering(start.Add(-q.cfg.lateWindow()))
}

// tally sorts the votes by answer; Granted lists the yes votes that count.
// For an acquire short of a quorum, a node not waited for whose connection
// shows it down is counted failed, so what no quorum could grant is not
// called busy.
func (q *voters) tally(op string, k keys, votes []vote) *QuorumError {
	qe := &QuorumError{Op: op, Key: k.lock, Quorum: q.quorum, Nodes: len(q.nodes)}
	yes, _, _ := countVotes(votes)
	short := op == "acquire" && yes < qe.Quorum
	for _, v := range votes {
		if !v.heard && short {
			v.err = q.unheard(v.n)
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
// alone; nil if it is not.
func (q *voters) unheard(n *node.Node) error {
	if err := n.Unreachable(); err != nil {
		return fmt.Errorf("not waited for: %w", err)
	}
	if n.Silent() {
		return fmt.Errorf("not waited for: nothing heard for %v: %w", q.cfg.nodeTimeout, context.DeadlineExceeded)
	}
	return nil
}
