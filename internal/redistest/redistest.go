// Package redistest is what the lock tests still call to start redis-server
// nodes. It forwards to internal/testsupport, which holds the one rule for
// every test (free loopback ports, fail in CI, skip elsewhere).
//
// Deprecated: use internal/testsupport; this package goes once the lock
// tests use it directly.
package redistest

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
)

// Age is how long Start lets new nodes run before it returns
// (testsupport.RedisAge).
const Age = testsupport.RedisAge

// Start starts n independent redis-server processes for t and stops them in
// t.Cleanup. It is testsupport.Redis.
func Start(t testing.TB, n int, opts localredis.Options) *localredis.Cluster {
	t.Helper()
	return testsupport.Redis(t, n, opts)
}

// Require fails the test in CI, and skips it elsewhere, when redis-server is
// not installed. It is testsupport.RequireRedis.
func Require(t testing.TB) {
	t.Helper()
	testsupport.RequireRedis(t)
}

// Options are client options for every node of c, first node first.
func Options(c *localredis.Cluster) []*redis.Options {
	out, err := testsupport.ClientOptions(c)
	if err != nil {
		panic(err) // URLs come from localredis itself
	}
	return out
}
