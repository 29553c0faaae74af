package lock_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// resetOnce cuts the connection the first time a client sends a chunk
// holding match, on whichever connection that is; fired says it did.
func resetOnce(match []byte, fired *atomic.Bool) func() chunkFault {
	return func() chunkFault {
		return func(chunk []byte) bool {
			return bytes.Contains(chunk, match) && fired.CompareAndSwap(false, true)
		}
	}
}

// A fenced lease's token write-back lost with its connection, on the one
// node where the next holders' quorums meet the lease's, with the counters
// 100 behind the token: the holders that follow must not each draw a token
// below it (100 refusals at the store, one after another). Sent again on
// the next connection, the write-back costs one refusal at most.
func TestLostWriteBackCostsOneRefusalAtMost(t *testing.T) {
	c := testsupport.Redis(t, 5, localredis.Options{})
	opts := testsupport.Options(t, c)
	var fired atomic.Bool
	proxy := newRelayProxy(t, opts[1].Addr, resetOnce([]byte(lock.RaiseFenceScript), &fired))
	opts[1].Addr = proxy.addr()
	const ttl = 2 * time.Second
	e := newEnvOn(t, opts, lock.Options{TTL: ttl})
	e.aged(c)
	ctx := context.Background()
	l := e.locker(lock.RedlockFence)
	fence := e.ns + "fence:k"
	// Node 0 is 100 ahead of the others: the lease draws its token there.
	for i, v := range []int{1100, 1000, 1000, 1000, 1000} {
		if err := e.raw[i].Set(ctx, fence, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// others hold k, for someone else, for a moment on the nodes given.
	others := func(nodes ...int) {
		for _, i := range nodes {
			if err := e.raw[i].Set(ctx, e.ns+"lock:k", "other", 300*time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	others(3, 4) // the lease: nodes 0–2, token 1101, written back to 1 and 2
	held := mustAcquire(t, l, "k", time.Second)
	top, _ := held.Token()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !fired.Load() {
		t.Fatal("the write-back never went out through the proxy: the fault did not happen")
	}
	e.waitGone(3, "k", time.Second)
	e.waitGone(4, "k", time.Second)
	// A release sent on the connection that broke is lost with it: the key
	// stays on node 1 for its TTL.
	e.waitGone(1, "k", ttl+time.Second)
	// Ten holders on nodes 1, 3 and 4: their quorum meets the lease's at
	// node 1 alone.
	refused := 0
	for range 10 {
		others(0, 2)
		lease := mustAcquire(t, l, "k", 5*time.Second)
		token, _ := lease.Token()
		if token <= top {
			refused++ // the store would refuse it: stale_fence
		}
		top = max(top, token)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		e.waitGone(0, "k", time.Second)
		e.waitGone(2, "k", time.Second)
	}
	if refused > 1 {
		t.Fatalf("%d of 10 holders after a lost write-back drew a token the store would refuse; one at most", refused)
	}
	t.Logf("tokens the store would refuse after a lost write-back, gap 100: %d of 10", refused)
}
