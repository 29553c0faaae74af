package lock_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"flashsale/internal/databirth"
	"flashsale/internal/fault"
	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// stallMeeting holds back the first chunk a client sends on a connection
// that carries the meeting's data-birth script for stall, with everything
// the client sends after it: a node slow to answer a connection's meeting.
func stallMeeting(stall time.Duration) func() chunkFault {
	return func() chunkFault {
		first := true
		return func(chunk []byte) bool {
			if first && bytes.Contains(chunk, []byte(databirth.Key)) {
				first = false
				time.Sleep(stall) // the fault itself: this node is slow to answer
			}
			return false
		}
	}
}

// A node that stalls on a connection's meeting past the dial timeout must
// not leave a connection whose replies are behind its commands: a reply
// owed to the meeting would be read as the vote for the next SET, the
// reply to that SET as the vote for the one after, and a client would be
// granted a lock that another holds on a quorum.
func TestStalledHandshakeNeverShiftsVotes(t *testing.T) {
	c := testsupport.Redis(t, 5, localredis.Options{})
	const ttl = 2 * time.Second
	holder := newEnv(t, c, lock.Options{TTL: ttl})
	holder.aged(c)
	ctx := context.Background()

	// The other client holds k on nodes 0–2: a bare quorum.
	for i := range 3 {
		if err := holder.raw[i].Set(ctx, holder.ns+"lock:k", "other", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}

	opts := testsupport.Options(t, c)
	proxy := newRelayProxy(t, opts[0].Addr, stallMeeting(300*time.Millisecond))
	opts[0].Addr = proxy.addr()
	opts[0].DialTimeout = 150 * time.Millisecond
	ls, err := lock.New(opts, ladder.With(lock.Options{Namespace: holder.ns, TTL: ttl, NodeTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	l, err := ls.Locker(lock.Redlock)
	if err != nil {
		t.Fatal(err)
	}

	// A free key first, granted by nodes 1–4 while node 0's handshake stalls;
	// its SET on node 0 is queued behind the stalled meeting.
	x, err := l.TryAcquire(ctx, "x")
	if err != nil {
		t.Fatalf("acquire a free key: %v", err)
	}
	defer x.Release(ctx)
	// Then the held key: nodes 1 and 2 refuse, 3 and 4 grant, and node 0's
	// answer decides.
	k, err := l.TryAcquire(ctx, "k")
	if err == nil {
		_ = k.Release(ctx)
		t.Fatal("granted k while another client holds it on nodes 0–2: a reply owed to an earlier command was counted as a vote")
	}
	if !errors.Is(err, lock.ErrNotAcquired) && !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("want busy or unavailable, got %v", err)
	}
	for i := range 3 {
		if v, err := holder.raw[i].Get(ctx, holder.ns+"lock:k").Result(); err != nil || v != "other" {
			t.Errorf("node %d holds %q (%v), want the other client's lease", i, v, err)
		}
	}
}

// The delayed-restart rule holds for a client that never met the nodes
// before: a process started after three of five nodes restarted without
// their data must not be granted a lock that another process holds.
func TestRestartedNodesSitOutForANewClient(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	for _, name := range []string{lock.Redlock, lock.RedlockFence} {
		t.Run(name, func(t *testing.T) {
			c := testsupport.Redis(t, 5, localredis.Options{})
			const ttl = 3 * time.Second
			first := newEnv(t, c, lock.Options{TTL: ttl})
			first.aged(c)
			ctx := context.Background()
			held, err := first.locker(name).TryAcquire(ctx, "k")
			if err != nil {
				t.Fatalf("first client: %v", err)
			}
			for i := range 3 {
				if err := c.Nodes[i].Restart(ctx, false); err != nil {
					t.Fatal(err)
				}
			}

			// A process that starts now: it has no memory of the nodes.
			ls, err := lock.New(testsupport.Options(t, c), ladder.With(lock.Options{Namespace: first.ns, TTL: ttl, NodeTimeout: 100 * time.Millisecond}))
			if err != nil {
				t.Fatal(err)
			}
			defer ls.Close()
			l, _ := ls.Locker(name)
			second, err := l.TryAcquire(ctx, "k")
			if time.Now().After(held.ValidUntil()) {
				t.Fatal("the first lease ran out during the test; its outcome proves nothing")
			}
			if err == nil {
				_ = second.Release(ctx)
				t.Fatal("a new client was granted the lock while the first still holds it: restarted nodes voted")
			}
			// The outcome is decided once a quorum is out of reach, so a
			// restarted node may go unheard, or time out on a busy
			// machine; none may count as granting.
			var qe *lock.QuorumError
			if !errors.As(err, &qe) {
				t.Fatalf("want a quorum error, got %v", err)
			}
			for i := range 3 {
				if addr := c.Nodes[i].Addr(); slices.Contains(qe.Granted, addr) {
					t.Errorf("restarted node %s counted as granting: %v", addr, err)
				}
			}
		})
	}
}

// A holder that crashes inside the critical section is dead: its watchdog
// must die with it, so the lease runs out within its TTL and the key sells
// again. A watchdog left running would extend it for ever.
func TestCrashStopsTheWatchdog(t *testing.T) {
	for _, name := range []string{lock.Lua, lock.Redlock, lock.RedlockFence} {
		t.Run(name, func(t *testing.T) {
			const ttl = 600 * time.Millisecond
			e := newEnv(t, shared(t), lock.Options{TTL: ttl, Watchdog: true})
			e.voting()
			setFaults(t, e, fault.Fault{Point: fault.InCriticalSection, Action: fault.Crash, P: 1})
			l := e.locker(name)
			ctx := context.Background()
			dead := mustAcquire(t, l, "k", time.Second)
			if err := dead.Checkpoint(ctx, fault.InCriticalSection); !errors.Is(err, fault.ErrCrashed) {
				t.Fatalf("checkpoint: %v, want ErrCrashed", err)
			}
			next := mustAcquire(t, l, "k", 5*ttl)
			if waited := next.Acquired().Sub(dead.Acquired()); waited < ttl/2 {
				t.Errorf("acquired %v after the crash, before the dead lease could run out", waited)
			}
			_ = next.Release(ctx)
		})
	}
}
