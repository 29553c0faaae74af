package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
)

// Through its proxy a client reaches a node while it runs, loses it (a
// dead connection, never a refused dial) while it is down, and reaches it
// again the moment it is back — without the client's dial back-off. A
// delay holds the replies; a cut drops everything until it heals; and the
// other instance's link to the same node is untouched by either.
func TestNetworkFollowsTheNodeAndTakesFaults(t *testing.T) {
	c := testsupport.Redis(t, 1, localredis.Options{})
	nw, err := StartNetwork(2, c.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	client := func(i int) *redis.Client {
		// Pool size 1 and no retries: one refused dial would open go-redis'
		// dial circuit for a second.
		rdb := redis.NewClient(&redis.Options{Addr: nw.Addr(i, 0), PoolSize: 1, MaxRetries: -1, DialTimeout: time.Second, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	a, b := client(0), client(1)
	ctx := context.Background()
	ping := func(rdb *redis.Client, d time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		start := time.Now()
		err := rdb.Ping(ctx).Err()
		return time.Since(start), err
	}
	if _, err := ping(a, time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if err := c.Nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := ping(a, time.Second); err == nil {
			t.Fatal("a dead node answered through the proxy")
		}
	}
	if err := c.Nodes[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ping(a, time.Second); err != nil {
		t.Errorf("the node is back, the first ping through the proxy failed: %v", err)
	}

	if err := nw.Delay(0, []int{0}, 300*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if d, err := ping(a, 2*time.Second); err != nil || d < 300*time.Millisecond {
		t.Errorf("a delayed reply came after %v (%v), want at least 300ms", d, err)
	}
	if d, err := ping(b, time.Second); err != nil || d > 200*time.Millisecond {
		t.Errorf("the other instance's link was slowed too: %v (%v)", d, err)
	}
	if err := nw.Heal(ctx); err != nil {
		t.Fatal(err)
	}

	if err := nw.Cut(0, []int{0}); err != nil {
		t.Fatal(err)
	}
	if _, err := ping(a, 300*time.Millisecond); err == nil {
		t.Error("a cut link answered")
	}
	if _, err := ping(b, time.Second); err != nil {
		t.Errorf("the other instance lost the node in a cut that was not its own: %v", err)
	}
	if err := nw.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	// The connection cut is closed on heal; the client's next one is new.
	var healed error
	for range 3 {
		if _, healed = ping(a, time.Second); healed == nil {
			break
		}
	}
	if healed != nil {
		t.Errorf("after heal: %v", healed)
	}
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ping(b, 300*time.Millisecond); err == nil {
		t.Error("a closed network still carries")
	}
}
