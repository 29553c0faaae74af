// Package redistest starts real redis-server nodes for tests, on free
// loopback ports, and stops them when the test ends. In CI (CI set) a
// machine without redis-server fails the test instead of skipping it.
package redistest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
)

// Age is how long Start lets new nodes run before it returns: a Redlock with
// restart awareness does not let a node vote before its uptime, which INFO
// gives in whole seconds, reaches the lock TTL plus drift (for the default
// 2 s TTL: 2.02 s, so 3 whole seconds). Tests with a longer TTL wait longer
// themselves.
const Age = 3 * time.Second

// Start starts n independent redis-server processes for t and stops them in
// t.Cleanup.
func Start(t testing.TB, n int, opts localredis.Options) *localredis.Cluster {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := localredis.Start(ctx, n, opts)
	if err != nil {
		t.Fatalf("start %d redis nodes: %v", n, err)
	}
	if err := c.Aged(ctx, Age); err != nil {
		t.Fatalf("new redis nodes: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop redis nodes: %v", err)
		}
	})
	return c
}

// Require fails the test in CI, and skips it elsewhere, when redis-server is
// not installed.
func Require(t testing.TB) {
	t.Helper()
	if localredis.Available() {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("redis-server is not installed; CI must install it (see .ci/run)")
	}
	t.Skip("redis-server is not installed")
}

// Options are client options for every node of c, first node first.
func Options(c *localredis.Cluster) []*redis.Options {
	out := make([]*redis.Options, 0, len(c.Nodes))
	for _, u := range c.URLs() {
		o, err := redis.ParseURL(u)
		if err != nil {
			panic(err) // URLs come from localredis itself
		}
		out = append(out, o)
	}
	return out
}
