//go:build unix

package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// TestSentinelFailover: a lease granted by the master just before it dies,
// with its replication held back, is not on the replica the sentinels
// promote, and a second client is granted the same lock while the first
// lease is still valid. lua hands out two leases; lua+fence does too, but
// the second one's token is not above the first's, so a store that takes
// only strictly higher tokens (inventory's registerFence) lets at most one
// of them write: unavailable, never unsafe.
func TestSentinelFailover(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	for _, tc := range []struct {
		variant string
		fenced  bool
	}{
		{lock.Lua, false},
		{lock.LuaFence, true},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			sc, fo := startSentinel(ctx, t)
			// Two app processes in front of the same Sentinel-managed
			// master. A long TTL: the first lease must still be valid when
			// the failover, which takes seconds, is over.
			ttl := 30 * time.Second
			ns := fmt.Sprintf("failover%d:", time.Now().UnixNano())
			client := func() *lock.Locker {
				ls, err := lock.New(nil, ladder.With(lock.Options{Sentinel: fo, TTL: ttl, Namespace: ns}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = ls.Close() })
				l, err := ls.Locker(tc.variant)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			a, b := client(), client()

			// A lease taken and given back while replication runs: its
			// fencing counter reaches the replica.
			warm := mustAcquire(t, a, "sku", 5*time.Second)
			if err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}
			first := failOverUnreplicated(ctx, t, sc, func() *lock.Lease { return mustAcquire(t, a, "sku", 5*time.Second) })

			second := acquireThroughFailover(ctx, t, b, "sku")
			if time.Now().After(first.ValidUntil()) {
				t.Fatalf("the first lease ran out (%v) before the second was granted: no overlap to show", first.ValidUntil())
			}
			if !tc.fenced {
				// Two holders of one lock, both inside their TTL.
				return
			}
			t1, _ := first.Token()
			t2, _ := second.Token()
			if t2 > t1 {
				t.Fatalf("token after failover %d is above the lost one %d: the store would take both", t2, t1)
			}
			t.Logf("tokens: lost lease %d, after failover %d: the store refuses whichever registers second", t1, t2)
		})
	}
}

// acquireThroughFailover acquires key, retrying while the client still
// finds the dead master (ErrUnavailable) until it follows the sentinels.
func acquireThroughFailover(ctx context.Context, t *testing.T, l *lock.Locker, key string) *lock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		lease, err := l.Acquire(ctx, key)
		if err == nil {
			return lease
		}
		if !errors.Is(err, lock.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("%s after the failover: %v (the promoted replica should not hold the lost lease)", l.Name(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startSentinel starts a Sentinel-managed master with its replica and
// sentinels, stopped when the test ends, and the client options that
// follow it.
func startSentinel(ctx context.Context, t *testing.T) (*localredis.SentinelCluster, *redis.FailoverOptions) {
	t.Helper()
	testsupport.RequireRedis(t)
	sc, err := localredis.StartSentinel(ctx, localredis.SentinelOptions{Logger: testsupport.Logger()})
	if err != nil {
		t.Fatalf("StartSentinel: %v", err)
	}
	t.Cleanup(func() { _ = sc.Stop() })
	return sc, &redis.FailoverOptions{MasterName: sc.MasterName(), SentinelAddrs: sc.Sentinels.Addrs()}
}

// failOverUnreplicated holds replication back, takes a lease with grant,
// kills the master and waits until the sentinels have promoted the
// replica, which never got the lease's key.
func failOverUnreplicated(ctx context.Context, t *testing.T, sc *localredis.SentinelCluster, grant func() *lock.Lease) *lock.Lease {
	t.Helper()
	master, err := sc.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := sc.HoldBack(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := grant()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.WaitFailover(ctx, master); err != nil {
		t.Fatal(err)
	}
	return held
}
