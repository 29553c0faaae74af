package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/keys"
)

// Restart awareness: a node whose data lost keys (a restart, a failover, a
// flush) does not vote until every lease it can have granted before the
// loss has run out, and its fencing counters are re-seeded from the other
// nodes first. docs/design.md, "Restart awareness", says why and how.

// dataAge is how old a node's data are, by their marker.
type dataAge struct {
	d time.Duration
}

// ttlKey is where every client records the largest lease TTL it uses on a
// node (recordTTL), so that a restarted node sits out the largest of them.
func (c *Config) ttlKey() string { return c.Namespace + "ttl" }

// seededKey marks a node whose fencing counters were re-seeded for its
// current data; its value names them (seededFor: the run_id and the data's
// birth).
func (c *Config) seededKey() string { return c.Namespace + "seeded" }

// record takes in a meeting's reading rd of the node (read on the votes'
// connection if votes), logs what changed, and starts re-seeding the
// node's counters when they need it.
func (n *Node) record(rd reading, votes bool) error {
	m, err := n.inc.met(rd, n.cfg.TTL, time.Now(), votes)
	if err != nil {
		return err
	}
	if !n.cfg.RestartAware {
		return nil
	}
	if (m.first || m.lost) && m.young {
		n.cfg.Logger.Warn("redis node restarted, failed over or flushed: not counted toward a quorum until its data are older than the largest TTL in use",
			"node", n.addr, "run_id", rd.id(), "data_age", rd.age.d, "largest_ttl", m.ttl, "counts_from", m.back)
	}
	if n.inc.startReseed() {
		go n.reseedLoop()
	}
	return nil
}

// Counts says whether a vote on a connection tagged tag (Answer.Tag: the
// incarnation its meeting met; "" when the caller cannot tell) counts
// toward a quorum at now: not from an incarnation since replaced, not while
// the node sits out or waits for its counters' re-seed. Always, without
// restart awareness.
func (n *Node) Counts(tag string, now time.Time) bool {
	return !n.cfg.RestartAware || n.inc.counts(tag, now)
}

// reseedLoop re-seeds the node's fencing counters until its current
// incarnation needs no re-seed (a newer one may turn up meanwhile) or the
// lockers close.
func (n *Node) reseedLoop() {
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
		n.cfg.Logger.Warn("re-seeding fencing counters failed; node still not counted", "node", n.addr, "err", err)
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, n.cfg.TTL)
	}
}

// reseed raises the node's fencing counters and its TTL record to the
// largest values that N−quorum+1 of the other nodes hold, and marks the node
// seeded for its incarnation, in one script; the node then sits out at least
// the largest TTL it learnt. (The other nodes need not be seeded
// themselves: on a new set none is, and a node that restarted with its data
// still holds its counters.)
func (n *Node) reseed(ctx context.Context) error {
	began := time.Now()
	n.inc.mu.Lock()
	data := seededFor(n.inc.runID, n.inc.birth)
	n.inc.mu.Unlock()
	var others []*Node
	for _, p := range n.peers {
		if p != n {
			others = append(others, p)
		}
	}
	timeout := 10 * n.cfg.Timeout
	var mu sync.Mutex
	highest := map[string]uint64{}
	errs := ForEach(ctx, others, timeout, func(ctx context.Context, p *Node) error {
		counters, err := readCounters(ctx, p.rdb, keys.Fences(n.cfg.Namespace))
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
	need := len(n.peers) - Quorum(len(n.peers)) + 1
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
	keys, args = append(keys, n.cfg.seededKey()), append(args, data)
	if err := reseedCounters.Run(ctx, n.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("node %s: %w", n.addr, err)
	}
	n.inc.seeded(data, began, time.Duration(highest[n.cfg.ttlKey()])*time.Millisecond)
	n.cfg.Logger.Info("fencing counters re-seeded for the node's data", "node", n.addr, "data", data, "counters", len(highest))
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
