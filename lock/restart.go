package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/databirth"
)

// Restart awareness: the delayed-restart rule of Redlock, for every client,
// by the age of a node's data.
//
// A node whose data lost keys forgets the locks it granted. If it votes
// again at once, a lease that held a bare quorum can be granted a second
// time: two holders. So such a node does not vote until every lease that
// can have been granted before the loss has run out: for a bit more than
// the largest TTL any client of these nodes uses (the Redis distlock page
// asks for "a bit more than the maximum TTL we use").
//
// When the data lost keys: not only when the process started. A replica
// that Sentinel promotes has run for as long as the cluster, without the
// writes replication held back; FLUSHALL empties a node that keeps
// running; another server can take over the node's address. So the rule
// counts from the birth of the node's data, a marker on the node itself
// (package databirth): a key that names the node's run_id and when the
// data became complete, written by whoever meets the node first (its
// starter, or a client's first connection) when it is missing or names
// another run_id. It dies with the data it vouches for (a flush, a wiped
// directory), and a reload or a promotion brings a new run_id, so the
// marker is renewed; its age is read on the node's clock alone, to the
// millisecond, so a second boundary cannot shorten the sit-out. The node
// counts once its data are sitOut old, and not before sitOut after its
// process started either (INFO uptime_in_seconds: whole seconds, so the
// start is taken as now − (uptime − 1 s), never earlier), whichever is
// later; a client that knew the node's previous incarnation also counts
// from the moment it first saw the new run_id. Votes travel on connections
// opened after that check, and a restart, a failover or a new server
// breaks every connection, so a process that starts at any moment, or
// meets the node for the first time, applies the rule too. A flush breaks
// no connection: so every vote that can count is followed, in the same
// write on the same connection, by a read of the marker its connection met
// (restart_check.go; that GET is this rule's, not the rung's). A marker gone
// or renewed means the vote does not count, the node sits out from now,
// and the connection is opened and the node met again.
//
// What the rule cannot cover: the node's clock. Both ends of the age come
// from it; a clock that jumps forward ages the data at once.
//
// The largest TTL: every client records its TTL on every node it connects
// to, as max(record, ttl), before its first vote there; a lease's quorum
// therefore carries its holder's TTL. A node that lost its data lost the
// record too, so before it votes its record is re-seeded with its fencing
// counters, from N−quorum+1 other nodes: at least one of them voted for any
// lease the old incarnation voted for, and holds that holder's TTL.
//
// Fencing counters get the same care. A node whose counters may be gone does
// not vote until they are re-seeded: raised to the largest value read from
// N−quorum+1 other nodes, which always include one that holds the last
// token written back. The node then carries a marker naming the incarnation
// (run_id) it was seeded for; an incarnation without it — restarted, with
// or without data — is re-seeded by whichever client meets it first.

// dataBirth marks a node's data born now if they carry no marker of their
// own run_id, and returns {birth, now} in ms on the node's clock.
var dataBirth = newScript(databirth.Script)

// dataAge is how old a node's data are, by their marker.
type dataAge struct {
	d     time.Duration
	known bool // false: the node refused the marker script for good (ACL, no scripting)
}

// MinUptime is the uptime a node must report (INFO uptime_in_seconds) before
// it may vote in a Redlock whose largest TTL is ttl: TTL + drift, plus the
// second by which a whole-second uptime can overstate the real one.
func MinUptime(ttl time.Duration) time.Duration { return sitOut(ttl) + time.Second }

// sitOut is how long a restarted node stays out after its start, for a
// largest TTL of ttl.
func sitOut(ttl time.Duration) time.Duration { return ttl + drift(ttl) }

// ttlKey is where every client records the largest lease TTL it uses on a
// node (recordTTL), so that a restarted node sits out the largest of them.
func (c *config) ttlKey() string { return c.namespace + "ttl" }

// seededKey marks a node whose fencing counters were re-seeded for its
// current incarnation; its value is that incarnation's run_id.
func (c *config) seededKey() string { return c.namespace + "seeded" }

// meet records what a meeting read of the node (awareness.go), logs what
// changed, and starts re-seeding the node's counters when they need it.
func (n *node) meet(rd reading) error {
	m, err := n.inc.met(rd, n.cfg.ttl, time.Now())
	if err != nil {
		return err
	}
	if !n.cfg.restartAware {
		return nil
	}
	if m.warn {
		n.cfg.logger.Warn("redis node refuses for good to tell what restart awareness reads: a restart or flush of it may go unseen, and a lease it held be granted twice",
			"node", n.addr, "refused", strings.Join(rd.refused, "; "))
	}
	if (m.first || m.lost) && m.young {
		n.cfg.logger.Warn("redis node restarted, failed over or flushed: not counted toward a quorum until its data are older than the largest TTL in use",
			"node", n.addr, "run_id", rd.id(), "data_age", rd.age.d, "data_age_known", rd.age.known, "largest_ttl", m.ttl, "counts_from", m.back)
	}
	if n.inc.startReseed() {
		go n.reseedLoop()
	}
	return nil
}

// counts says whether a vote on a connection tagged inc (the incarnation
// its meeting met; "" when the transport cannot tell) counts toward a quorum
// now: not from an incarnation since replaced, not while the node sits out
// or waits for its counters' re-seed.
func (n *node) counts(inc string, now time.Time) bool {
	return !n.cfg.restartAware || n.inc.counts(inc, now)
}

// reseedLoop re-seeds the node's fencing counters until its current
// incarnation needs no re-seed (a newer one may turn up meanwhile) or the
// lockers close.
func (n *node) reseedLoop() {
	wait := 50 * time.Millisecond
	for {
		n.inc.mu.Lock()
		done := !n.inc.reseed || n.ctx.Err() != nil
		if done {
			n.inc.reseeding = false
		}
		n.inc.mu.Unlock()
		if done {
			return
		}
		err := n.reseed(n.ctx)
		if err == nil {
			continue
		}
		n.cfg.logger.Warn("re-seeding fencing counters failed; node still not counted", "node", n.addr, "err", err)
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, n.cfg.ttl)
	}
}

// reseed raises the node's fencing counters and its TTL record to the
// largest values that N−quorum+1 of the other nodes hold, and marks the node
// seeded for its incarnation, in one script; the node then sits out at least
// the largest TTL it learnt. (The other nodes need not be seeded
// themselves: on a new set none is, and a node that restarted with its data
// still holds its counters.)
func (n *node) reseed(ctx context.Context) error {
	began := time.Now()
	n.inc.mu.Lock()
	id := n.inc.runID
	n.inc.mu.Unlock()
	var others []*node
	for _, p := range n.peers {
		if p != n {
			others = append(others, p)
		}
	}
	timeout := 10 * n.cfg.nodeTimeout
	var mu sync.Mutex
	highest := map[string]uint64{}
	errs := forEachNode(ctx, others, timeout, func(ctx context.Context, p *node) error {
		counters, err := readCounters(ctx, p.rdb, n.cfg.namespace+"fence:*")
		if err != nil {
			return err
		}
		// The largest TTL recorded there rides along as one more counter.
		ttl, err := p.rdb.Get(ctx, n.cfg.ttlKey()).Uint64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		counters[n.cfg.ttlKey()] = ttl
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
	need := len(n.peers) - (len(n.peers)/2 + 1) + 1
	if len(n.peers) == 1 {
		need = 0 // a lone node has nothing to be re-seeded from; only the store's check guards its tokens
	}
	if answered < need {
		return fmt.Errorf("only %d of the %d other nodes answered, %d needed: %w", answered, len(others), need, errors.Join(errs...))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	keys := make([]string, 0, len(highest)+1)
	args := make([]any, 0, len(highest)+1)
	for key, c := range highest {
		keys, args = append(keys, key), append(args, c)
	}
	keys, args = append(keys, n.cfg.seededKey()), append(args, id)
	if err := reseedCounters.Run(ctx, n.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("node %s: %w", n.addr, err)
	}
	n.inc.seeded(id, began, time.Duration(highest[n.cfg.ttlKey()])*time.Millisecond)
	n.cfg.logger.Info("fencing counters re-seeded for this incarnation", "node", n.addr, "run_id", id, "counters", len(highest))
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
