package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/databirth"
	"flashsale/lock/internal/wire"
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
	known bool // false: the node refused the marker script (ACL, no scripting)
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

// incarnation is what this process knows of a node's current incarnation.
type incarnation struct {
	mu        sync.Mutex
	runID     string
	gone      map[string]bool // run_ids of earlier incarnations: met late, they change nothing
	start     time.Time       // the latest the current incarnation can have started
	ttl       time.Duration   // the largest lease TTL known in use on these nodes
	back      time.Time       // does not vote before this: start + ttl + drift
	reseed    bool            // counters not yet re-seeded for this incarnation
	seededFor string          // the run_id whose counters are known re-seeded
	reseeding bool            // a re-seed loop is running
	notified  bool            // keyspace notifications turned on for this incarnation
	blind     bool            // the node would not tell its uptime: warned once
}

// meet records the incarnation that a new connection found: info is its
// INFO server reply (empty if refused), age its data's age, seeded the
// value of the seeded marker and recorded the largest TTL recorded on the node (this client's
// included). The first time this process meets an incarnation, it also adds
// the keyspace events the waiters need, through get and set on that
// connection. It returns an error only if the connection failed; an error
// reply to get or set is no reason to drop it.
func (n *node) meet(info string, age dataAge, seeded string, recorded time.Duration, get func() (string, error), set func(flags string) error) error {
	now := time.Now()
	id := infoField(info, "run_id")
	uptime, err := strconv.ParseInt(infoField(info, "uptime_in_seconds"), 10, 64)
	known := err == nil && id != ""

	inc := &n.inc
	lost := false
	inc.mu.Lock()
	if known && inc.gone[id] {
		// A connection to an incarnation this process has seen replaced,
		// met late: it must not turn the node's state back.
		inc.mu.Unlock()
		return nil
	}
	met := known && id != inc.runID // first connection to this incarnation
	if known {
		// Whole seconds now minus whole seconds at start: the real uptime
		// is more than one second short of the reported one at most.
		start := now.Add(-time.Duration(max(uptime-1, 0)) * time.Second)
		born := now.Add(-age.d)
		younger := age.known && born.After(start)
		if younger {
			// The data are younger than the process: a failover, a flush,
			// a reload that re-marked them.
			start = born
		}
		if met {
			if inc.runID != "" {
				// This process saw the incarnation before: the new one
				// started after that, and no later than now.
				if inc.gone == nil {
					inc.gone = map[string]bool{}
				}
				inc.gone[inc.runID] = true
				start = now
			}
			inc.runID, inc.notified, inc.start = id, false, start
		} else if start.After(inc.start) {
			// The same process, with data younger than we knew: flushed
			// since we met it.
			inc.start, lost = start, younger
			if lost && seeded != id {
				inc.seededFor = "" // the flush took the counters too
			}
		}
		inc.ttl = max(inc.ttl, recorded, n.cfg.ttl)
		if back := inc.start.Add(sitOut(inc.ttl)); back.After(inc.back) {
			inc.back = back
		}
		if seeded == id {
			inc.seededFor = id
		}
		// A marker read before a re-seed finished must not undo it.
		inc.reseed = inc.seededFor != id
	}
	warn := !known && !inc.blind
	inc.blind = inc.blind || !known
	young := now.Before(inc.back)
	startReseed := n.cfg.restartAware && inc.reseed && !inc.reseeding
	inc.reseeding = inc.reseeding || startReseed
	notify := n.cfg.notifications && n.cfg.fast.Load() && !inc.notified // the speed layer's wake-ups (fast.go)
	back, ttl := inc.back, inc.ttl
	inc.mu.Unlock()

	switch {
	case warn && n.cfg.restartAware:
		n.cfg.logger.Warn("redis node does not tell its run_id and uptime (INFO refused?): it votes without restart awareness", "node", n.addr)
	case (met || lost) && young && n.cfg.restartAware:
		n.cfg.logger.Warn("redis node restarted, failed over or flushed: not counted toward a quorum until its data are older than the largest TTL in use",
			"node", n.addr, "run_id", id, "uptime_s", uptime, "data_age", age.d, "data_age_known", age.known, "largest_ttl", ttl, "counts_from", back)
	}
	if startReseed {
		go n.reseedLoop()
	}
	if !notify {
		return nil
	}
	cur, err := get()
	if err == nil {
		if want := notifyFlags(cur); want != cur {
			err = set(want)
		}
	}
	if err = connectionError(err); err == nil {
		// Done, or refused by the node: either way not worth asking again.
		inc.mu.Lock()
		inc.notified = inc.runID == id || !known
		inc.mu.Unlock()
	}
	return err
}

// raiseTTL notes a larger TTL in use on these nodes, learnt while
// re-seeding: the node sits out at least that long after its start.
func (n *node) raiseTTL(ttl time.Duration) {
	n.inc.mu.Lock()
	defer n.inc.mu.Unlock()
	n.inc.ttl = max(n.inc.ttl, ttl)
	if back := n.inc.start.Add(sitOut(n.inc.ttl)); back.After(n.inc.back) {
		n.inc.back = back
	}
}

// connectionError is err unless it is only the node's answer (an error
// reply), which leaves the connection in step.
func connectionError(err error) error {
	if _, ok := errors.AsType[wire.ServerError](err); ok {
		return nil
	}
	if _, ok := errors.AsType[redis.Error](err); ok {
		return nil
	}
	return err
}

// counts says whether a vote from the node's incarnation inc (the run_id
// its connection met; "" when the transport cannot tell) counts toward a
// quorum now: not from an incarnation since replaced, not before the
// sit-out after the current one's start, nor before its fencing counters
// were re-seeded for it.
func (n *node) counts(inc string, now time.Time) bool {
	if !n.cfg.restartAware {
		return true
	}
	n.inc.mu.Lock()
	defer n.inc.mu.Unlock()
	if inc != "" && tagRunID(inc) != n.inc.runID {
		return false
	}
	return !now.Before(n.inc.back) && !n.inc.reseed
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
	n.raiseTTL(time.Duration(highest[n.cfg.ttlKey()]) * time.Millisecond)
	n.inc.mu.Lock()
	n.inc.seededFor = id
	if n.inc.runID == id {
		n.inc.reseed = false
	}
	n.inc.mu.Unlock()
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
