package lock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/locktap"
	"flashsale/internal/taptest"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// With the speed layer off, what runs is the taught code: a waiter retries
// after a random delay (no line), the release is the rung's own
// compare-and-delete (the key is deleted between two holders, no
// hand-over), and nobody is told busy early. Switched on at run time, the
// waiter stands in the key's line and the lease passes to it directly.
func TestSpeedLayerSwitch(t *testing.T) {
	for _, fast := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[fast]
		t.Run(name, func(t *testing.T) {
			var tries atomic.Int64
			e := newEnv(t, shared(t), taptest.Observed(lock.Options{FastOff: fast}, func(ev locktap.Event) {
				if ev.Kind == locktap.Acquired {
					tries.Store(int64(ev.Tries))
				}
			}))
			e.ls.SetFast(fast) // at run time, the other way round from the start
			if e.ls.Fast() != fast {
				t.Fatalf("Fast() = %v after SetFast(%v)", e.ls.Fast(), fast)
			}
			ctx := context.Background()
			if err := e.raw[0].ConfigSet(ctx, "notify-keyspace-events", "KEA").Err(); err != nil {
				t.Fatal(err)
			}
			events := e.raw[0].Subscribe(ctx, "__keyspace@0__:"+e.ns+"lock:k")
			defer events.Close()
			if _, err := events.Receive(ctx); err != nil { // the subscription is confirmed
				t.Fatal(err)
			}
			l := e.locker(lock.Lua)
			// A waiter that found the key free at once proves nothing: try
			// again until it waited.
			for attempt := 0; ; attempt++ {
				if attempt == 5 {
					t.Fatal("the waiter never had to wait")
				}
				holder := mustAcquire(t, l, "k", time.Second)
				sets := e.setCalls()
				got := acquireAsync(ctx, t, l, "k", 5*time.Second)
				if fast {
					e.queued("k", 2*time.Second)
				} else {
					e.setsAfter(sets, 2*time.Second)
				}
				if w := l.ExpectedWait("k"); !fast && w != 0 {
					t.Errorf("ExpectedWait = %v with the speed layer off, want 0: no early busy answer", w)
				}
				if err := holder.Release(ctx); err != nil {
					t.Fatal(err)
				}
				next := <-got
				if next == nil {
					return
				}
				_ = next.Release(ctx)
				if tries.Load() < 2 && !fast {
					continue
				}
				break
			}
			deletes := 0
			for {
				rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				msg, err := events.ReceiveMessage(rctx)
				cancel()
				if err != nil {
					break
				}
				if msg.Payload == "del" {
					deletes++
				}
			}
			lines, err := e.raw[0].Exists(ctx, e.ns+"line:k").Result()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			// Off: every release deletes (the holder's, then the waiter's),
			// and no line was made. On: the first release is a hand-over.
			if want := map[bool]int{false: 2, true: 1}[fast]; deletes != want {
				t.Errorf("%d deletes of the key, want %d", deletes, want)
			}
			if !fast && lines > 0 {
				t.Error("a line was made with the speed layer off")
			}
		})
	}
}

// setCalls is how many SET commands the first node has run.
func (e *env) setCalls() int64 {
	e.t.Helper()
	info, err := e.raw[0].Info(context.Background(), "commandstats").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_set:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// setsAfter waits until the first node has run a SET since it had run n:
// a waiter has tried.
func (e *env) setsAfter(n int64, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for e.setCalls() <= n {
		if time.Now().After(deadline) {
			e.t.Fatal("no SET reached the node")
		}
		time.Sleep(time.Millisecond)
	}
}

// With the speed layer off nothing of it runs, as the nodes themselves
// see it: two app instances contend for a lua and a Redlock key, and no
// node has a pub/sub subscriber. Switched on at run time, the first node
// gains this process's subscriber (so the checks can see the layer), and
// still no CONFIG SET and no notifications turned on: the library leaves a
// server's configuration alone in either mode; switched off again, the
// subscribers go.
func TestSpeedLayerOffRunsNothing(t *testing.T) {
	c := testsupport.Redis(t, 3, localredis.Options{})
	nodes := testsupport.Options(t, c)
	ctx := context.Background()
	var raw []*redis.Client
	for _, o := range nodes {
		r := redis.NewClient(o)
		t.Cleanup(func() { _ = r.Close() })
		// localredis starts its nodes with notifications on: a node as an
		// operator left it, with none, shows whether the app sets them.
		if err := r.ConfigSet(ctx, "notify-keyspace-events", "").Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		raw = append(raw, r)
	}
	e := newEnvOn(t, nodes, lock.Options{FastOff: true})
	contendAcross(ctx, t, e, e.instance(lock.Options{FastOff: true}))
	for i, r := range raw {
		if subs := subscribers(t, r); subs != 0 {
			t.Errorf("node %d: %d pub/sub subscribers with the speed layer off, want 0", i, subs)
		}
		if calls := commandCalls(t, r, "config|set"); calls != 0 {
			t.Errorf("node %d: %d CONFIG SET calls with the speed layer off, want 0", i, calls)
		}
		if got := notifications(t, r); got != "" {
			t.Errorf("node %d: notify-keyspace-events = %q with the speed layer off, want it left empty", i, got)
		}
	}

	e.ls.SetFast(true)
	within(t, 5*time.Second, "no pub/sub subscriber on the first node with the speed layer on", func() bool {
		return subscribers(t, raw[0]) > 0
	})
	for i, r := range raw {
		if calls := commandCalls(t, r, "config|set"); calls != 0 {
			t.Errorf("node %d: %d CONFIG SET calls with the speed layer on, want 0", i, calls)
		}
		if got := notifications(t, r); got != "" {
			t.Errorf("node %d: notify-keyspace-events = %q with the speed layer on, want it left as the node was started", i, got)
		}
	}
	e.ls.SetFast(false)
	within(t, 5*time.Second, "the pub/sub subscriber stayed after the speed layer was switched off", func() bool {
		return subscribers(t, raw[0]) == 0
	})
}

// contendAcross has the env's instance and other, another instance on the same
// nodes, wait together for a lua and a Redlock key that the env's instance
// holds, and fails the test unless both waiters are served once it is
// released.
func contendAcross(ctx context.Context, t *testing.T, e *env, other *lock.Client) {
	t.Helper()
	for _, name := range []string{lock.Lua, lock.Redlock} {
		l := e.locker(name)
		ol, err := other.Locker(name)
		if err != nil {
			t.Fatal(err)
		}
		holder := mustAcquire(t, l, name, 5*time.Second)
		sets := e.setCalls()
		here, there := acquireAsync(ctx, t, l, name, 5*time.Second), acquireAsync(ctx, t, ol, name, 5*time.Second)
		e.setsAfter(sets+1, 2*time.Second) // the waiters have tried: they wait
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for _, got := range []<-chan *lock.Lease{here, there} {
			lease := <-got
			if lease == nil {
				t.Fatalf("%s: a waiter was not served", name)
			}
			_ = lease.Release(ctx)
		}
	}
}

// within polls ok until it holds, and fails the test with msg if it does not
// within d.
func within(t *testing.T, d time.Duration, msg string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subscribers counts the clients of a node subscribed to any channel or
// pattern, as CLIENT LIST shows them.
func subscribers(t *testing.T, r *redis.Client) int {
	t.Helper()
	list, err := r.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, client := range strings.Split(strings.TrimSpace(list), "\n") {
		for _, f := range strings.Fields(client) {
			k, v, _ := strings.Cut(f, "=")
			if (k == "sub" || k == "psub" || k == "ssub") && v != "0" {
				n++
				break
			}
		}
	}
	return n
}

// commandCalls is how many times a node ran cmd since its stats were reset.
func commandCalls(t *testing.T, r *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := r.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// notifications is the node's notify-keyspace-events setting.
func notifications(t *testing.T, r *redis.Client) string {
	t.Helper()
	v, err := r.ConfigGet(context.Background(), "notify-keyspace-events").Result()
	if err != nil {
		t.Fatal(err)
	}
	return v["notify-keyspace-events"]
}
