package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// tokens checks that fencing tokens grow strictly across holders.
type tokens struct {
	t    *testing.T
	last uint64
}

func (tk *tokens) next(lease *lock.Lease) {
	tk.t.Helper()
	token, fenced := lease.Token()
	if !fenced {
		return
	}
	if token <= tk.last {
		tk.t.Errorf("fencing token %d after %d: want strictly increasing", token, tk.last)
	}
	tk.last = token
}

func TestRedlockNodesDown(t *testing.T) {
	testsupport.Long(t, "nodes frozen, flushed or down for seconds")
	for _, name := range []string{lock.Redlock, lock.RedlockFence} {
		t.Run(name, func(t *testing.T) {
			c := testsupport.Redis(t, 5, localredis.Options{})
			e := newEnv(t, c, lock.Options{TTL: 2 * time.Second})
			l := e.locker(name)
			tk := &tokens{t: t}
			ctx := context.Background()
			cycle := func() {
				t.Helper()
				// A paused node runs the SETs of tries that timed out on it
				// once it resumes, and keeps those keys until their TTL:
				// the next holder may have to wait that out.
				lease := mustAcquire(t, l, "k", 3*e.ls.TTL())
				tk.next(lease)
				if err := lease.Release(ctx); err != nil {
					t.Fatalf("release: %v", err)
				}
			}
			cycle()
			for _, i := range []int{3, 4} {
				if err := c.Nodes[i].Kill(); err != nil {
					t.Fatal(err)
				}
			}
			cycle() // 3 of 5 still make a quorum

			if err := c.Nodes[1].Pause(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			wait := time.Second
			ctx2, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			_, err := l.Acquire(ctx2, "k")
			if !errors.Is(err, lock.ErrUnavailable) {
				t.Fatalf("with 3 of 5 nodes gone: got %v, want ErrUnavailable", err)
			}
			var qe *lock.QuorumError
			if !errors.As(err, &qe) {
				t.Fatalf("want a QuorumError naming the failed nodes, got %v", err)
			}
			for _, i := range []int{1, 3, 4} {
				if _, named := qe.Failed[c.Nodes[i].Addr()]; !named {
					t.Errorf("node %d (%s) is down but not named as failed: %v", i, c.Nodes[i].Addr(), err)
				}
			}
			if took := time.Since(start); took > wait+time.Second {
				t.Errorf("gave up after %v, want about the %v wait budget", took, wait)
			}
			t.Logf("error seen by the caller: %v", err)

			if err := c.Nodes[1].Resume(); err != nil {
				t.Fatal(err)
			}
			cycle() // a paused node that resumes counts again
			for _, i := range []int{3, 4} {
				if err := c.Nodes[i].Start(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cycle()
		})
	}
}

// A lease holds a bare quorum (3 of 5: two nodes were taken by another
// client); one of its three nodes restarts without its data. Without restart
// awareness the restarted node votes again and a second client gets the lock
// while the first still holds it. With it, the node sits out a TTL, and its
// fencing counters are re-seeded before it counts again.
func TestRedlockNodeRestart(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	cases := []struct {
		name        string
		variant     string
		aware       bool
		doubleGrant bool
	}{
		{"unaware", lock.Redlock, false, true},
		{"unaware", lock.RedlockFence, false, true},
		{"aware", lock.Redlock, true, false},
		{"aware", lock.RedlockFence, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.variant+"/"+tc.name, func(t *testing.T) {
			c := testsupport.Redis(t, 5, localredis.Options{})
			const ttl = 2 * time.Second
			e := newEnv(t, c, lock.Options{TTL: ttl, RestartAwarenessOff: !tc.aware})
			e.aged(c)
			l := e.locker(tc.variant)
			ctx := context.Background()

			// Warm up every connection, so the lockers know each node's run_id.
			first := mustAcquire(t, l, "k", time.Second)
			_ = first.Release(ctx)

			// Another client holds nodes 3 and 4 for a moment.
			for _, i := range []int{3, 4} {
				if err := e.raw[i].Set(ctx, e.ns+"lock:k", "other", 300*time.Millisecond).Err(); err != nil {
					t.Fatal(err)
				}
			}
			holder, err := l.TryAcquire(ctx, "k")
			if err != nil {
				t.Fatalf("bare-quorum acquire: %v", err)
			}
			e.waitGone(3, "k", 2*time.Second)
			e.waitGone(4, "k", 2*time.Second)

			if err := c.Nodes[2].Restart(ctx, false); err != nil {
				t.Fatal(err)
			}
			second, err := l.TryAcquire(ctx, "k")
			if got := err == nil; got != tc.doubleGrant {
				t.Fatalf("second client while the first holds: acquired = %v (err %v), want %v", got, err, tc.doubleGrant)
			}
			if err != nil && !isBusy(err) {
				t.Fatalf("want a plain busy answer, got %v", err)
			}
			if time.Now().After(holder.ValidUntil()) {
				t.Fatal("the first lease expired during the test; the double grant proves nothing")
			}
			ta, fenced := holder.Token()
			if second != nil && fenced {
				// Without re-seeding, the restarted node's counter starts
				// over: the second holder's token need not be newer.
				tb, _ := second.Token()
				t.Logf("double grant: first token %d, second token %d", ta, tb)
			}
			if !tc.aware {
				return
			}

			// Once the first lease is over and a TTL has passed since the
			// restart, the node is re-seeded and counts again; tokens keep
			// growing.
			_ = holder.Release(ctx)
			deadline := time.Now().Add(3 * ttl)
			var next *lock.Lease
			for {
				next = mustAcquire(t, l, "k", 2*time.Second)
				// All five nodes hold it once the restarted one counts again.
				if e.pttl(2, "k") > 0 {
					if n, _ := e.raw[2].Get(ctx, e.ns+"fence:k").Uint64(); fenced && n < ta {
						t.Errorf("restarted node's fencing counter %d, below the token %d already issued", n, ta)
					}
					break
				}
				_ = next.Release(ctx)
				if time.Now().After(deadline) {
					t.Fatal("restarted node never counted again")
				}
				time.Sleep(100 * time.Millisecond)
			}
			if tb, _ := next.Token(); fenced && tb <= ta {
				t.Errorf("token after restart %d, want above %d", tb, ta)
			}
			_ = next.Release(ctx)
		})
	}
}

// A node paused while a lease is taken and given back gets the SET and the
// delete that undoes it on one connection, in that order: once it resumes,
// the key is free there for the next holder, not held by a late SET for its
// whole TTL.
func TestPausedNodeGetsReleaseAfterAcquire(t *testing.T) {
	c := testsupport.Redis(t, 5, localredis.Options{})
	// A TTL that cannot run out during the test. Restart awareness would keep
	// these new nodes out of every quorum for that long; this test is about
	// the order of commands on one connection, not about restarts.
	e := newEnv(t, c, lock.Options{TTL: 30 * time.Second, RestartAwarenessOff: true})
	l := e.locker(lock.Redlock)
	ctx := context.Background()
	warm := mustAcquire(t, l, "k", time.Second) // opens every node's connection
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}

	if err := c.Nodes[4].Pause(); err != nil {
		t.Fatal(err)
	}
	first := mustAcquire(t, l, "k", 2*time.Second) // granted by nodes 0–3
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[4].Resume(); err != nil {
		t.Fatal(err)
	}
	second := mustAcquire(t, l, "k", 2*time.Second)
	defer second.Release(ctx)

	key := e.ns + "lock:k"
	deadline := time.Now().Add(2 * time.Second)
	for {
		owner, err := e.raw[4].Get(ctx, key).Result()
		if err == nil && owner == second.Owner() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 4 holds %q (err %v), want the second lease %q: the first lease's late SET outlived its release",
				owner, err, second.Owner())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lua+fence and redlock+fence draw from the same counter on the first node,
// and a store sees the tokens of both on one row: a redlock+fence token must
// come out above the lua+fence token just before it, or the store refuses
// the new holder as stale.
func TestFencedVariantsShareTheCounter(t *testing.T) {
	e := newEnv(t, shared(t))
	e.voting()
	single, multi := e.locker(lock.LuaFence), e.locker(lock.RedlockFence)
	ctx := context.Background()
	tk := &tokens{t: t}
	for range 30 {
		for _, l := range []*lock.Locker{single, multi} {
			lease := mustAcquire(t, l, "row", time.Second)
			tk.next(lease)
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A redlock+fence token grows across holders whose quorums share a single
// node: the first holder draws a high token on a node the next one cannot
// use, and the next draws from nodes whose counters never saw it. Only the
// write-back, which reaches the shared node ahead of the first holder's
// release, carries the token across. The next holder is another
// instance (its own connections), so no ordering of this process's
// commands helps it.
func TestFenceTokenGrowsAcrossQuorums(t *testing.T) {
	for _, fast := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast=off", true: "fast=on"}[fast], func(t *testing.T) {
			e := newEnv(t, shared(t), lock.Options{FastOff: !fast})
			e.voting()
			ctx := context.Background()
			// held makes nodes refuse votes on the key: another client's
			// lease there.
			held := func(nodes ...int) func() {
				for _, i := range nodes {
					if err := e.raw[i].Set(ctx, e.ns+"lock:row", "other", time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
				}
				return func() {
					for _, i := range nodes {
						if err := e.raw[i].Del(ctx, e.ns+"lock:row").Err(); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if err := e.raw[4].Set(ctx, e.ns+"fence:row", 1000, 0).Err(); err != nil {
				t.Fatal(err)
			}

			free := held(1, 2) // the first quorum: nodes 0, 3, 4
			first := mustAcquire(t, e.locker(lock.RedlockFence), "row", 2*time.Second)
			ta, _ := first.Token()
			if ta <= 1000 {
				t.Fatalf("first token %d: want it drawn on node 4, above 1000", ta)
			}
			free()
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}

			defer held(3, 4)() // the next quorum: nodes 0, 1, 2
			other, err := e.instance(lock.Options{FastOff: !fast}).Locker(lock.RedlockFence)
			if err != nil {
				t.Fatal(err)
			}
			next := mustAcquire(t, other, "row", 2*time.Second)
			defer next.Release(ctx)
			if tb, _ := next.Token(); tb <= ta {
				t.Errorf("next holder's token %d, want above the first holder's %d", tb, ta)
			}
		})
	}
}
