package loadtest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
)

// Through the relay a client reaches a node while it runs, loses it (a
// dead connection, never a refused dial) while it is down, and reaches it
// again the moment it is back — without the client's dial back-off.
func TestRelayFollowsTheNode(t *testing.T) {
	c := testsupport.Redis(t, 1, localredis.Options{})
	r, err := startRelay(c.Nodes[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Pool size 1 and no retries: one refused dial would open go-redis'
	// dial circuit for a second.
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 1, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	ctx := context.Background()
	ping := func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	}
	if err := ping(); err != nil {
		t.Fatalf("through the relay: %v", err)
	}
	if err := c.Nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := ping(); err == nil {
			t.Fatal("a dead node answered through the relay")
		}
	}
	if err := c.Nodes[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err != nil {
		t.Errorf("the node is back, the first ping through the relay failed: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err == nil {
		t.Error("a closed relay still relays")
	}
}
