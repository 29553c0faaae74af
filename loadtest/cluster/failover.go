package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"flashsale/internal/clock"
	"flashsale/internal/localredis"
)

// errNoSentinel is the failover recipe run on nodes without the runner's
// Sentinel cluster.
var errNoSentinel = errors.New("the failover recipe needs the Sentinel cluster the runner starts for it")

// sentinelNodes are Nodes that also have a Sentinel cluster.
type sentinelNodes interface {
	Sentinel() *localredis.SentinelCluster
}

// FailoverRecipe makes "the master dies after a grant and before
// replicating it" certain, once per cell:
//
//  1. cut every instance off the last two of Redlock's nodes (plain nodes
//     n−3 and n−2: the failover column leaves node n−1 out), so that a
//     Redlock lease holds a bare quorum, the Sentinel node among it; the
//     single-node variants do not use those nodes;
//  2. hold replication back: the replica is frozen and its link dropped
//     on the master, so nothing the master grants from now on reaches it;
//  3. wait until a lease begins on the master after that (a lock key, or
//     a new owner of one, that was not there when replication stopped);
//  4. kill the master, thaw the replica, heal the cut, and wait until the
//     sentinels have promoted the replica. The lease is not on it; its
//     holder is still in its critical section; the next client is granted
//     the same lock, by the promoted node alone or, for Redlock, by it and
//     the two nodes that were cut off, unless it sits out.
//
// The dead master stays down until the attack ends (Heal brings it back
// as the new master's replica).
func FailoverRecipe() *NodeRecipe {
	return &NodeRecipe{
		Steps: fmt.Sprintf("at the start: cut the instances off the last two of Redlock's nodes, freeze the replica and drop its replication link; "+
			"as soon as a lease begins on the master (at most %v later), kill the master, thaw the replica, heal the cut and wait for the sentinels to promote it", failoverWait),
		MinNodes: 3,
		run: func(ctx context.Context, st stage) error {
			_, err := Failover(ctx, st.nodes, st.pattern, st.note)
			return err
		},
	}
}

// failoverWait is how long Failover waits for a lease to begin on the
// held-back master: under load one begins within milliseconds; past this
// it kills the master anyway, and says so.
const failoverWait = 3 * time.Second

// Failover plays FailoverRecipe's steps once on nodes, which must be a
// Local's (Local.Nodes) with its Sentinel cluster started, noting each
// step; pattern matches the lock keys. It returns the promoted node, the
// master from now on. The dead master stays down: the Sentinel cluster's
// Heal brings it back as the new master's replica, after which it can be
// played again.
func Failover(ctx context.Context, nodes Nodes, pattern string, note func(string)) (*localredis.Node, error) {
	sn, ok := nodes.(sentinelNodes)
	if !ok || sn.Sentinel() == nil {
		return nil, errNoSentinel
	}
	nw, err := networkOf(nodes)
	if err != nil {
		return nil, err
	}
	sc := sn.Sentinel()
	master, err := sc.Master(ctx)
	if err != nil {
		return nil, err
	}
	n := nodes.Len()
	cut := []int{n - 3, n - 2}
	for i := range nw.Instances() {
		if err := nw.Cut(i, cut); err != nil {
			return nil, errors.Join(err, nw.Heal(ctx))
		}
	}
	replica, err := sc.HoldBack(ctx)
	if err != nil {
		return nil, errors.Join(err, nw.Heal(ctx))
	}
	watch, err := newLeaseWatch(master.URL(), pattern)
	if err != nil {
		return nil, errors.Join(err, replica.Resume(), nw.Heal(ctx))
	}
	defer watch.close()
	fresh := watch.since(ctx, failoverWait)
	if err := master.Kill(); err != nil {
		return nil, errors.Join(err, replica.Resume(), nw.Heal(ctx))
	}
	if err := errors.Join(replica.Resume(), nw.Heal(ctx)); err != nil {
		return nil, err
	}
	when := fmt.Sprintf("no lease began on it within %v", failoverWait)
	if fresh {
		when = "a lease it had not replicated had just begun"
	}
	note(fmt.Sprintf("instances cut off nodes %s; replication held back; master %s killed: %s; cut healed", Indexes(cut), master.Addr(), when))
	began := time.Now()
	promoted, err := sc.WaitFailover(ctx, master)
	if err != nil {
		return nil, err
	}
	note(fmt.Sprintf("the sentinels promoted %s (%v after the kill)", promoted.Addr(), time.Since(began).Round(time.Millisecond)))
	return promoted, nil
}

// since polls until a lock key holds an owner it did not hold at the first
// poll (a new key, or one that changed hands), or d has passed, and
// reports whether one did.
func (w *leaseWatch) since(ctx context.Context, d time.Duration) bool {
	end := time.Now().Add(d)
	var before map[string]string // nil until the first poll succeeds
	for time.Now().Before(end) && ctx.Err() == nil {
		keys, err := w.rdb.Keys(ctx, w.pattern).Result()
		if err == nil {
			now := map[string]string{}
			if len(keys) > 0 {
				vals, err := w.rdb.MGet(ctx, keys...).Result()
				if err != nil {
					clock.Sleep(ctx, time.Millisecond)
					continue
				}
				for i, key := range keys {
					if v, _ := vals[i].(string); v != "" {
						now[key] = v
					}
				}
			}
			if before == nil {
				before = now
			}
			for k, v := range now {
				if before[k] != v {
					return true
				}
			}
		}
		clock.Sleep(ctx, time.Millisecond)
	}
	return false
}

// Sentinel is the Sentinel cluster in front of the instances' first node
// once they run with AppSettings.Failover; nil before.
func (l *Local) Sentinel() *localredis.SentinelCluster { return l.sentinel }
