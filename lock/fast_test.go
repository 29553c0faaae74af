package lock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
			e := newEnv(t, shared(t), lock.WithFast(!fast), lock.WithObserver(func(ev lock.Event) {
				if ev.Kind == lock.Acquired {
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
