package lock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/redisinfo"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// grantedWhileHeld tries l on key every few milliseconds until held's
// validity is over, and fails the test if any try is granted before then.
func grantedWhileHeld(t *testing.T, l *lock.Locker, key string, held *lock.Lease) {
	t.Helper()
	ctx := context.Background()
	tries := 0
	for time.Now().Before(held.ValidUntil()) {
		second, err := l.TryAcquire(ctx, key)
		tries++
		if err == nil {
			granted := time.Now()
			_ = second.Release(ctx)
			if granted.Before(held.ValidUntil()) {
				t.Fatalf("granted %v before the first lease ran out: a restarted node voted too early", held.ValidUntil().Sub(granted).Round(time.Millisecond))
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tries < 3 {
		t.Fatalf("only %d tries inside the first lease: the test proves nothing", tries)
	}
}

// nodeUptime is the node's own INFO uptime_in_seconds.
func nodeUptime(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		return -1
	}
	v, ok := redisinfo.Field(info, "uptime_in_seconds")
	if !ok {
		return -1
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// A node restarted late in a wall-clock second reports one second of uptime
// a few milliseconds later. A client that meets it after that tick must not
// take the second for real: the node would vote up to a second early, and a
// lease that held a bare quorum could be granted twice.
func TestRestartSitOutSurvivesTheSecondBoundary(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	c := testsupport.Redis(t, 5, localredis.Options{})
	const ttl = 2 * time.Second
	first := newEnv(t, c, lock.Options{TTL: ttl})
	first.aged(c)
	ctx := context.Background()

	// Start half-way through a second, so that the restart below ends late
	// in it and the next second boundary comes soon after.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)))
	held := first.bareQuorum("k", 3, 4) // nodes 0–2
	if err := c.Nodes[2].Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for nodeUptime(t, first.raw[2]) < 1 {
		time.Sleep(5 * time.Millisecond)
	}
	if real := time.Since(restarted); real > 900*time.Millisecond {
		t.Fatalf("the node reported a second of uptime only %v after its restart: the edge was not reached", real)
	}

	// A process that meets the node only now, after the tick.
	second := newEnvOn(t, testsupport.Options(t, c), lock.Options{Namespace: first.ns, TTL: ttl})
	grantedWhileHeld(t, second.locker(lock.Redlock), "k", held)
}

// Restart awareness sits a restarted node out for the largest TTL any client
// of the nodes uses, not for the asking client's own: a client with a short
// TTL must not be granted a lock that a client with a long one holds.
func TestRestartSitOutIsTheLargestTTL(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	c := testsupport.Redis(t, 5, localredis.Options{})
	long := newEnv(t, c, lock.Options{TTL: 5 * time.Second})
	short := newEnvOn(t, testsupport.Options(t, c), lock.Options{Namespace: long.ns, TTL: 500 * time.Millisecond})
	long.aged(c)
	short.aged(c)
	ctx := context.Background()

	held, err := long.locker(lock.Redlock).TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("long-TTL client: %v", err)
	}
	for i := range 3 {
		if err := c.Nodes[i].Restart(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	grantedWhileHeld(t, short.locker(lock.Redlock), "k", held)
}
