//go:build unix

package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// The first Redlock node is behind Sentinel. A lease holds a bare quorum
// (the Sentinel node and plain nodes 0 and 1), the master dies before it
// replicated the key, and the replica is promoted without it. A process
// that starts after the failover meets a node that has run for as long as
// the cluster: by its uptime it would vote at once, for a second holder.
// By its data's age (the replica's marker names the old master) it sits
// out the TTL. With restart awareness off, the second lease is granted:
// the control that shows the fault is real.
func TestPromotedReplicaSitsOut(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	for _, aware := range []bool{true, false} {
		t.Run(fmt.Sprintf("aware=%v", aware), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			sc, fo := startSentinel(ctx, t)
			plain := testsupport.Redis(t, 4, localredis.Options{})
			// Long enough for the failover, which takes seconds, to end
			// inside the first lease's validity.
			const ttl = 15 * time.Second
			opts := lock.Options{Sentinel: fo, TTL: ttl, RestartAwarenessOff: !aware, NodeTimeout: 200 * time.Millisecond}
			first := newEnvOn(t, testsupport.Options(t, plain), opts)
			if aware {
				// Every node's data are born at its start: the sit-out of a
				// first start passes before the test begins.
				first.waitVoting(5, ttl+20*time.Second)
			}
			// The Sentinel node and plain nodes 0 and 1.
			held := failOverUnreplicated(ctx, t, sc, func() *lock.Lease { return first.bareQuorum("k", 2, 3) })
			if time.Now().After(held.ValidUntil()) {
				t.Fatal("the failover outlasted the first lease: nothing to show")
			}

			// A process that starts only now.
			opts.Namespace = first.ns
			second := newEnvOn(t, testsupport.Options(t, plain), opts)
			secondHolder(t, aware, second.locker(lock.Redlock), held)
		})
	}
}

// FLUSHALL empties a node that keeps running, with the same run_id and an
// uptime as old as ever: a lease that held a bare quorum there must not be
// granted again to a process that meets the node after the flush.
func TestFlushedNodeSitsOut(t *testing.T) {
	testsupport.Long(t, "nodes frozen, flushed or down for seconds")
	for _, aware := range []bool{true, false} {
		t.Run(fmt.Sprintf("aware=%v", aware), func(t *testing.T) {
			c := testsupport.Redis(t, 5, localredis.Options{})
			const ttl = 3 * time.Second
			opts := lock.Options{TTL: ttl, RestartAwarenessOff: !aware}
			first := newEnv(t, c, opts)
			first.aged(c)
			held := first.bareQuorum("k", 3, 4) // nodes 0–2
			if err := first.raw[2].FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			opts.Namespace = first.ns
			second := newEnvOn(t, testsupport.Options(t, c), opts)
			secondHolder(t, aware, second.locker(lock.Redlock), held)
		})
	}
}

// FLUSHALL empties a node while every client's connections to it stay open:
// no connection breaks, so no handshake meets the new data. A lease that held
// a bare quorum there must not be granted again, neither to the process that
// holds it (its connections met the node before the flush) nor to another
// that was already connected.
func TestFlushUnderOpenConnectionsSitsOut(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	for _, who := range []string{"same process", "another connected process"} {
		t.Run(who, func(t *testing.T) {
			c := testsupport.Redis(t, 5, localredis.Options{})
			const ttl = 3 * time.Second
			first := newEnv(t, c, lock.Options{TTL: ttl})
			first.aged(c)
			try := first.locker(lock.Redlock)
			if who != "same process" {
				other := first.instance(lock.Options{TTL: ttl})
				try = mustGet(t, other, lock.Redlock)
				// Meet every node on the votes' connections before the flush.
				warm := mustAcquire(t, try, "warm", 5*time.Second)
				if err := warm.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			held := first.bareQuorum("k", 3, 4) // nodes 0–2
			if err := first.raw[2].FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			grantedWhileHeld(t, try, "k", held)
		})
	}
}

func mustGet(t *testing.T, ls *lock.Client, name string) *lock.Locker {
	t.Helper()
	l, err := ls.Locker(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// bareQuorum takes key with Redlock while another client holds it, for a
// moment, on the nodes others (indices of e.raw): the lease gets a bare
// quorum of the rest. It returns once those moments are over.
func (e *env) bareQuorum(key string, others ...int) *lock.Lease {
	e.t.Helper()
	ctx := context.Background()
	for _, i := range others {
		if err := e.raw[i].Set(ctx, e.ns+"lock:"+key, "other", 100*time.Millisecond).Err(); err != nil {
			e.t.Fatal(err)
		}
	}
	held, err := e.locker(lock.Redlock).TryAcquire(ctx, key)
	if err != nil {
		e.t.Fatalf("bare-quorum acquire: %v", err)
	}
	for _, i := range others {
		e.waitGone(i, key, time.Second)
	}
	return held
}

// secondHolder tries l, a process that started after a node lost held's
// key, on that key while held is valid: with restart awareness it must
// never be granted; without, it must be, or the fault never happened.
func secondHolder(t *testing.T, aware bool, l *lock.Locker, held *lock.Lease) {
	t.Helper()
	if aware {
		grantedWhileHeld(t, l, held.Key(), held)
		return
	}
	ctx := context.Background()
	for time.Now().Before(held.ValidUntil()) {
		if lease, err := l.TryAcquire(ctx, held.Key()); err == nil {
			_ = lease.Release(ctx)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("without restart awareness the node that lost the key should vote for a second holder: the fault did not happen")
}

// waitVoting waits until n nodes vote for the env's lockers.
func (e *env) waitVoting(n int, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for e.ls.Voting() < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("only %d of %d nodes vote after %v", e.ls.Voting(), n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
