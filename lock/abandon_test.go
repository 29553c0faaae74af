package lock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"flashsale/lock"
	"flashsale/lock/ladder"
)

// slowLink is a toxiproxy proxy (embedded as a library) in front of one
// Redis node, on a free loopback port; delay holds back every reply.
type slowLink struct {
	t     *testing.T
	proxy *toxiproxy.Proxy
}

func newSlowLink(t *testing.T, upstream string) *slowLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "node0", addr, upstream)
	if err := server.Collection.Add(p, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Collection.Clear() })
	return &slowLink{t: t, proxy: p}
}

func (s *slowLink) addr() string { return s.proxy.Listen }

// delay holds every reply from the node for d from now on.
func (s *slowLink) delay(d time.Duration) {
	s.t.Helper()
	spec := fmt.Sprintf(`{"name":"delay","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds())
	if _, err := s.proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		s.t.Fatal(err)
	}
}

// goneBy waits until the lock key has left node 0 and reports whether it
// did before deadline: deleted, not left to expire.
func (e *env) goneBy(key string, deadline time.Time) bool {
	e.t.Helper()
	for e.pttl(0, key) != -2 {
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now().Before(deadline)
}

// A caller that gives up while its try is in flight leaves no key behind:
// the node runs the SET NX all the same, and the try must take its own
// value back (compare-and-delete) rather than leave the key held by nobody
// for a whole TTL. Replies come 150 ms late; the caller waits 40 ms.
func TestAbandonedTryCleansUp(t *testing.T) {
	for _, variant := range []string{lock.Lua, ladder.LuaCheck, lock.LuaFence} {
		t.Run(variant, func(t *testing.T) {
			c := shared(t)
			e := newEnv(t, c, lock.Options{TTL: 3 * time.Second})
			opts := e.nodes[0]
			link := newSlowLink(t, opts.Addr)
			slow := *opts
			slow.Addr = link.addr()
			ls := e.instanceOn(&slow, lock.Options{})
			l, err := ls.Locker(variant)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			// The link's connection is made before the delay: the try
			// itself is what comes back late.
			warm(t, l)
			link.delay(150 * time.Millisecond)
			before := e.calls(0, "set", "eval", "evalsha")
			start := time.Now()
			tctx, cancel := context.WithTimeout(ctx, 40*time.Millisecond)
			_, err = l.TryAcquire(tctx, "k")
			cancel()
			if !errors.Is(err, lock.ErrUnavailable) {
				t.Fatalf("a try cut short by its caller: want ErrUnavailable, got %v", err)
			}
			e.calls(before+1, "set", "eval", "evalsha") // the try ran on the node
			if !e.goneBy("k", start.Add(e.ls.TTL()/2)) {
				t.Fatal("the abandoned try's key stayed until its TTL ran out: held by nobody, every other client told busy")
			}
		})
	}
}

// The cleanup deletes only the abandoned try's own value: a key another
// client holds stays.
func TestAbandonedTryLeavesAnotherHolder(t *testing.T) {
	c := shared(t)
	e := newEnv(t, c, lock.Options{TTL: 3 * time.Second})
	other, err := e.locker(lock.Lua).TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	link := newSlowLink(t, e.nodes[0].Addr)
	slow := *e.nodes[0]
	slow.Addr = link.addr()
	ls := e.instanceOn(&slow, lock.Options{})
	l, err := ls.Locker(lock.Lua)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	warm(t, l)
	link.delay(150 * time.Millisecond)
	before := e.calls(0, "eval", "evalsha")
	tctx, cancel := context.WithTimeout(ctx, 40*time.Millisecond)
	_, err = l.TryAcquire(tctx, "k")
	cancel()
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
	// The cleanup's compare-and-delete is on its way: wait until the node
	// has run it.
	e.calls(before+1, "eval", "evalsha")
	if got, err := e.raw[0].Get(ctx, e.ns+"lock:k").Result(); err != nil || got != other.Owner() {
		t.Fatalf("the other holder's key: %q, %v; want its value %q", got, err, other.Owner())
	}
	_ = other.Release(ctx)
}

// instanceOn is another app instance in the env's namespace with node 0
// reached at o (a proxy in front of it), closed when the test ends.
func (e *env) instanceOn(o *redis.Options, opts lock.Options) *lock.Client {
	e.t.Helper()
	opts.Namespace, opts.TTL = e.ns, e.ls.TTL()
	ls, err := lock.New([]*redis.Options{o}, ladder.With(opts))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = ls.Close() })
	return ls
}

// calls waits until node 0 has run at least want of the given commands
// since it started (its INFO commandstats), at most a few seconds, and
// returns how many it has run.
func (e *env) calls(want int, cmds ...string) int {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := e.raw[0].Info(context.Background(), "commandstats").Result()
		if err != nil {
			e.t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(info, "\n") {
			for _, cmd := range cmds {
				if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
					calls, _, _ := strings.Cut(v, ",")
					c, _ := strconv.Atoi(calls)
					n += c
				}
			}
		}
		if n >= want {
			return n
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("node 0 ran %d of %v, want %d", n, cmds, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// warm takes and gives back another key with l, so that the connection
// the next try uses is open.
func warm(t *testing.T, l *lock.Locker) {
	t.Helper()
	lease, err := l.TryAcquire(context.Background(), "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The speed layer's hand-over is a try too: a release whose caller gives
// up while the hand-over script is in flight must not leave the key with
// the next holder's value and nobody to hold it. The waiter here then gets
// the key once the script's value is taken back, not when its TTL ends:
// with keyspace events, the delete wakes it; without them, nothing but the
// clean-up itself can, since the waiter dozes until the releaser's lease
// would have run out.
//
// Replies come 150 ms late, and a connection opened through such a link
// takes several replies to set up (about a second), so the bound is half
// of a long TTL rather than a few round trips.
func TestAbandonedHandOverCleansUp(t *testing.T) {
	for _, variant := range []string{lock.Lua, lock.LuaFence} {
		for _, events := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/events=%v", variant, events), func(t *testing.T) {
				c := shared(t)
				e := newEnv(t, c, lock.Options{TTL: 8 * time.Second})
				link := newSlowLink(t, e.nodes[0].Addr)
				slow := *e.nodes[0]
				slow.Addr = link.addr()
				ls := e.instanceOn(&slow, lock.Options{NotificationsOff: !events})
				ls.SetFast(true)
				l, err := ls.Locker(variant)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				// One hand-over at full speed first: the node has the
				// script cached, and the slow one runs it on its first send.
				if lease := <-handedOver(t, l, mustAcquire(t, l, "k", time.Second)); lease != nil {
					_ = lease.Release(ctx)
				}
				holder := mustAcquire(t, l, "k", time.Second)
				waiter := waitHere(t, l, "k")
				link.delay(150 * time.Millisecond)
				start := time.Now()
				rctx, cancel := context.WithTimeout(ctx, 40*time.Millisecond)
				_ = holder.Release(rctx) // cut short: its error is expected
				cancel()
				lease := <-waiter
				if lease == nil {
					return
				}
				defer lease.Release(ctx)
				if got := time.Since(start); got > e.ls.TTL()/2 {
					t.Fatalf("the waiter got the key %v after the release, past half its %v TTL: the hand-over's value stayed, held by nobody, or nobody woke the waiter", got.Round(time.Millisecond), e.ls.TTL())
				}
			})
		}
	}
}

// waitHere starts a waiter for key with l and returns once it waits in
// this process's waiting room.
func waitHere(t *testing.T, l *lock.Locker, key string) <-chan *lock.Lease {
	t.Helper()
	got := acquireAsync(context.Background(), t, l, key, 10*time.Second)
	for !l.WaitingHere(key) {
		time.Sleep(time.Millisecond)
	}
	return got
}

// handedOver releases holder with a waiter of the same process waiting,
// which gets the lease.
func handedOver(t *testing.T, l *lock.Locker, holder *lock.Lease) <-chan *lock.Lease {
	t.Helper()
	got := waitHere(t, l, holder.Key())
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	return got
}
