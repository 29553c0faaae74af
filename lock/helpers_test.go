package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/internal/localredis"
	"flashsale/internal/taptest"
	"flashsale/internal/testsupport"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// One five-node cluster serves every test that does not stop nodes; each
// test keeps to its own key namespace.
var (
	sharedOnce    sync.Once
	sharedCluster *localredis.Cluster
	sharedErr     error
	namespaces    atomic.Int64
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(secondProcess(spec))
	}
	code := m.Run()
	if sharedCluster != nil {
		_ = sharedCluster.Stop()
	}
	os.Exit(code)
}

func shared(t testing.TB) *localredis.Cluster {
	t.Helper()
	testsupport.RequireRedis(t)
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sharedCluster, sharedErr = localredis.Start(ctx, 5, localredis.Options{})
		if sharedErr != nil {
			return
		}
		// New nodes do not vote in their first TTL + drift (restart
		// awareness): let them age past the default TTL once, for every test.
		sharedErr = sharedCluster.Aged(ctx, testsupport.RedisAge)
	})
	if sharedErr != nil {
		t.Fatalf("start shared redis nodes: %v", sharedErr)
	}
	return sharedCluster
}

// env is one test's view of a cluster: its lockers, its namespace and a raw
// client per node to look at what the locks left in Redis.
type env struct {
	t      testing.TB
	ls     *lock.Client
	ns     string
	nodes  []*redis.Options
	raw    []*redis.Client
	faults *fault.Plan // the plan the lockers' trace asks (setFaults)
}

// newEnv is a fresh namespace on c's nodes, with the lockers opts (at most
// one) describe.
func newEnv(t testing.TB, c *localredis.Cluster, opts ...lock.Options) *env {
	t.Helper()
	return newEnvOn(t, testsupport.Options(t, c), opts...)
}

// newEnvOn is newEnv over the given nodes only.
func newEnvOn(t testing.TB, nodes []*redis.Options, opts ...lock.Options) *env {
	t.Helper()
	ns := fmt.Sprintf("t%d:", namespaces.Add(1))
	o, plan := taptest.Tap(ladder.With(testOptions(ns, opts)))
	ls, err := lock.New(nodes, o)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ls: ls, ns: ns, nodes: nodes, faults: plan}
	for _, o := range nodes {
		e.raw = append(e.raw, redis.NewClient(o))
	}
	t.Cleanup(func() {
		_ = ls.Close()
		for _, r := range e.raw {
			_ = r.Close()
		}
	})
	return e
}

// instance is another app instance on the env's nodes and namespace, as a
// separate process would be: its own connections, waiting rooms and place
// in a key's line. It is closed when the test ends.
func (e *env) instance(opts ...lock.Options) *lock.Client {
	e.t.Helper()
	ls, err := lock.New(e.nodes, ladder.With(testOptions(e.ns, opts)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = ls.Close() })
	return ls
}

// voting waits until a quorum of nodes may vote: a node sits out its first
// TTL + drift after it starts (restart awareness cannot tell a first start
// from a restart that lost its data).
func (e *env) voting() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e.ls.TTL()+10*time.Second)
	defer cancel()
	for {
		err := e.ls.Ping(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("nodes never ready to vote: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// aged waits until every node of c has been up long enough to vote for this
// env's TTL, as any client sees it (uptime comes in whole seconds), and then
// until every node votes here.
func (e *env) aged(c *localredis.Cluster) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e.ls.TTL()+10*time.Second)
	defer cancel()
	if err := c.Aged(ctx, lock.MinUptime(e.ls.TTL())+time.Second); err != nil {
		e.t.Fatal(err)
	}
	e.voting()
	for e.ls.Voting() < len(c.Nodes) {
		select {
		case <-ctx.Done():
			e.t.Fatalf("only %d of %d nodes vote", e.ls.Voting(), len(c.Nodes))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (e *env) locker(name string) *lock.Locker {
	e.t.Helper()
	l, err := e.ls.Locker(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// pttl is the lock key's remaining TTL on node i: -2 gone, -1 no TTL.
func (e *env) pttl(i int, key string) time.Duration {
	e.t.Helper()
	d, err := e.raw[i].PTTL(context.Background(), e.ns+"lock:"+key).Result()
	if err != nil {
		e.t.Fatalf("PTTL on node %d: %v", i, err)
	}
	return d
}

// await reads the lock key's TTL on node i until ok accepts it or within
// has passed, and returns the last reading.
func (e *env) await(i int, key string, within time.Duration, ok func(time.Duration) bool) time.Duration {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		d := e.pttl(i, key)
		if ok(d) || time.Now().After(deadline) {
			return d
		}
		time.Sleep(time.Millisecond)
	}
}

// acquireAsync acquires key with l in the background, waiting at most
// within: the channel gets the lease, or nil once the test has been told
// why there is none.
func acquireAsync(ctx context.Context, t testing.TB, l *lock.Locker, key string, within time.Duration) <-chan *lock.Lease {
	got := make(chan *lock.Lease, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		lease, err := l.Acquire(wctx, key)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	return got
}

// waitGone waits until the lock key has left node i (expired or deleted).
func (e *env) waitGone(i int, key string, within time.Duration) {
	e.t.Helper()
	if e.await(i, key, within, func(d time.Duration) bool { return d == -2 }) != -2 {
		e.t.Fatalf("lock %q still on node %d after %v", key, i, within)
	}
}

// nodesOf is how many nodes a variant writes its lock to.
func nodesOf(name string, all int) int {
	switch name {
	case lock.Redlock, lock.RedlockFence:
		return all
	case ladder.None:
		return 0
	}
	return 1
}

func mustAcquire(t testing.TB, l *lock.Locker, key string, within time.Duration) *lock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("%s: acquire %q: %v", l.Name(), key, err)
	}
	return lease
}

func isBusy(err error) bool { return errors.Is(err, lock.ErrNotAcquired) }

// lockRungs are the ladder's rungs, none first, in ladder order. The
// store's designs take no lock and are not on it: package inventory tests
// them.
func lockRungs() []string { return ladder.Names() }

// testOptions is opts' one element (or none) in namespace ns, with a
// generous per-node timeout unless it sets one: these tests run beside
// others on a shared machine, and a slow answer is not the point.
func testOptions(ns string, opts []lock.Options) lock.Options {
	var o lock.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Namespace == "" {
		o.Namespace = ns
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 100 * time.Millisecond
	}
	return o
}
