package lock_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"flashsale/internal/randhex"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// Benchmarks compare every variant with references measured in the same run:
// a PING round trip, sync.Mutex, and redsync (a widely used Redlock library)
// on the same five nodes. Read them as ratios, never as absolute times.
//
//	go test -run '^$' -bench . -benchtime 2s ./lock/

// pair is one acquire+release of some lock on key, however it is implemented.
type pair func(ctx context.Context, key string) (unlock func(), err error)

func variantPair(l *lock.Locker) pair {
	return func(ctx context.Context, key string) (func(), error) {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			return nil, err
		}
		return func() { _ = lease.Release(context.Background()) }, nil
	}
}

func redsyncPair(rs *redsync.Redsync, opts ...redsync.Option) pair {
	return func(ctx context.Context, key string) (func(), error) {
		m := rs.NewMutex("rs:"+key, append([]redsync.Option{redsync.WithExpiry(2 * time.Second)}, opts...)...)
		if err := m.LockContext(ctx); err != nil {
			return nil, err
		}
		return func() { _, _ = m.UnlockContext(context.Background()) }, nil
	}
}

// barePair is the Redlock protocol and nothing else, the reference the
// lock's own work is measured against: SET NX PX on every node at once, a
// quorum of yes, then compare-and-delete on every node at once. No fault
// point, no restart awareness, no validity: what a lease costs at the least.
func barePair(rdbs []*redis.Client) pair {
	del := redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)
	return func(ctx context.Context, key string) (func(), error) {
		k, v := "bare:"+key, randhex.String(16)
		all := func(do func(*redis.Client) bool) int {
			var yes atomic.Int32
			var wg sync.WaitGroup
			for _, r := range rdbs {
				wg.Go(func() {
					if do(r) {
						yes.Add(1)
					}
				})
			}
			wg.Wait()
			return int(yes.Load())
		}
		granted := all(func(r *redis.Client) bool {
			return r.Do(ctx, "SET", k, v, "NX", "PX", 2000).Err() == nil
		})
		release := func() {
			all(func(r *redis.Client) bool { return del.Run(context.Background(), r, []string{k}, v).Err() == nil })
		}
		if granted < len(rdbs)/2+1 {
			release()
			return nil, fmt.Errorf("bare Redlock: %d of %d nodes granted", granted, len(rdbs))
		}
		return release, nil
	}
}

func mutexPair() pair {
	var mu sync.Mutex
	return func(context.Context, string) (func(), error) {
		mu.Lock()
		return mu.Unlock, nil
	}
}

type benchEnv struct {
	e       *env
	redsync *redsync.Redsync
}

func newBenchEnv(b *testing.B) *benchEnv {
	c := shared(b)
	return &benchEnv{e: newEnv(b, c), redsync: redsyncOn(b, testsupport.Options(b, c))}
}

// redsyncOn is redsync over nodes, its go-redis clients made as its users
// make them; they are closed when the test ends.
func redsyncOn(tb testing.TB, nodes []*redis.Options) *redsync.Redsync {
	var pools []rsredis.Pool
	for _, o := range nodes {
		cl := redis.NewClient(o)
		tb.Cleanup(func() { _ = cl.Close() })
		pools = append(pools, rsgoredis.NewPool(cl))
	}
	return redsync.New(pools...)
}

// BenchmarkUncontended is one acquire+release on a free key.
func BenchmarkUncontended(b *testing.B) {
	be := newBenchEnv(b)
	ctx := context.Background()
	b.Run("ref=ping", func(b *testing.B) {
		rdb := be.e.raw[0]
		for b.Loop() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ref=sync.Mutex", func(b *testing.B) { loopPairs(b, mutexPair()) })
	for _, name := range lockRungs() {
		b.Run(name, func(b *testing.B) { loopPairs(b, variantPair(be.e.locker(name))) })
	}
	// Redlock over the first node alone: the same client code as the
	// five-node rows, so the ratio between them is the cost of the nodes.
	one := newEnvOn(b, testsupport.Options(b, shared(b))[:1])
	b.Run("ref=redlock-1", func(b *testing.B) { loopPairs(b, variantPair(one.locker(lock.Redlock))) })
	b.Run("ref=redsync-5", func(b *testing.B) { loopPairs(b, redsyncPair(be.redsync)) })
	b.Run("ref=bare-5", func(b *testing.B) { loopPairs(b, barePair(be.e.raw)) })
}

func loopPairs(b *testing.B, p pair) {
	ctx := context.Background()
	for b.Loop() {
		unlock, err := p(ctx, "free")
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
}

// BenchmarkDistinctKeys is 16 clients, each on its own key: throughput of
// independent locks (pairs/s).
func BenchmarkDistinctKeys(b *testing.B) {
	be := newBenchEnv(b)
	cases := []struct {
		name string
		p    pair
	}{
		{lock.Lua, variantPair(be.e.locker(lock.Lua))},
		{lock.Redlock, variantPair(be.e.locker(lock.Redlock))},
		{lock.RedlockFence, variantPair(be.e.locker(lock.RedlockFence))},
		{"ref=redsync-5", redsyncPair(be.redsync)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var next atomic.Int64
			b.SetParallelism(max(1, 16/runtimeProcs()))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("own:%d", next.Add(1))
				ctx := context.Background()
				for pb.Next() {
					unlock, err := tc.p(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					unlock()
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
		})
	}
}

// BenchmarkHotKey is 32 clients on ONE key with a 1 ms critical section. It
// reports throughput as a share of the ceiling 1/(section + acquire +
// release), with acquire+release measured uncontended just before and the
// section as it really ran; the p99
// wait for the lock; and how unevenly the clients were served (busiest /
// idlest).
func BenchmarkHotKey(b *testing.B) {
	be := newBenchEnv(b)
	cases := []struct {
		name string
		p    pair
	}{
		{"ref=sync.Mutex", mutexPair()},
		{lock.Lua, variantPair(be.e.locker(lock.Lua))},
		{lock.Redlock, variantPair(be.e.locker(lock.Redlock))},
		{lock.RedlockFence, variantPair(be.e.locker(lock.RedlockFence))},
		{"ref=redsync-5", redsyncPair(be.redsync)},
		{"ref=redsync-5-retry1ms", redsyncPair(be.redsync, redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1<<20))},
	}
	const clients, section = 32, time.Millisecond
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			const solo = 200 // enough samples that one slow pair does not move the ceiling
			var overhead time.Duration
			for range solo {
				start := time.Now()
				unlock, err := tc.p(ctx, "solo")
				if err != nil {
					b.Fatal(err)
				}
				unlock()
				overhead += time.Since(start)
			}
			overhead /= solo

			var left atomic.Int64
			left.Store(int64(b.N))
			served := make([]int, clients)
			waits := make([][]time.Duration, clients)
			var failed, inside atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i := range clients {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						t0 := time.Now()
						unlock, err := tc.p(ctx, "hot")
						if err != nil {
							failed.Add(1)
							continue
						}
						t1 := time.Now()
						waits[i] = append(waits[i], t1.Sub(t0))
						time.Sleep(section)
						inside.Add(int64(time.Since(t1)))
						unlock()
						served[i]++
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()

			var all []time.Duration
			done := 0
			for i := range clients {
				all = append(all, waits[i]...)
				done += served[i]
			}
			slices.Sort(all)
			// The section as it really ran: a 1 ms sleep overshoots a little.
			ran := time.Duration(inside.Load() / int64(max(done, 1)))
			ceiling := 1 / (ran + overhead).Seconds()
			rate := float64(done) / elapsed.Seconds()
			b.ReportMetric(rate, "pairs/s")
			b.ReportMetric(100*rate/ceiling, "%ceiling")
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-wait-ms")
			}
			if lo := slices.Min(served); lo > 0 {
				b.ReportMetric(float64(slices.Max(served))/float64(lo), "busiest/idlest")
			}
			b.ReportMetric(float64(failed.Load()), "gave-up")
		})
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
