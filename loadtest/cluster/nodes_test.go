package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/clock"
	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
)

func TestMinority(t *testing.T) {
	for n, want := range map[int][]int{3: {2}, 4: {3}, 5: {3, 4}, 7: {4, 5, 6}} {
		if got := minority(n); !slices.Equal(got, want) {
			t.Errorf("minority(%d) = %v, want %v", n, got, want)
		}
	}
}

// The node recipes against real redis-server processes: what they leave
// down, what they restart and when, and that Heal brings every node back.
func TestNodeRecipes(t *testing.T) {
	testsupport.Long(t, "node recipes run for seconds")
	c := testsupport.Redis(t, 5, localredis.Options{})
	nodes := clusterNodes{c: c}
	ctx := context.Background()
	var notes []string
	note := func(s string) { notes = append(notes, s) }

	if err := DownRecipe().Run(ctx, nodes, 100*time.Millisecond, "t:lock:*", note); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		if want := i < 3; n.Running() != want {
			t.Errorf("after node-down, node %d running = %v, want %v", i, n.Running(), want)
		}
	}
	if err := nodes.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		if !n.Running() {
			t.Errorf("after Heal, node %d is down", i)
		}
	}

	// A client that takes a lock on node 0 every 5 ms: the recipe must see
	// those leases begin and restart node 0 right then.
	// It reaches node 0 through a proxy, as the app instances do, so the
	// restarts do not put its client into dial back-off.
	nw, err := StartNetwork(1, c.Addrs()[:1])
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	app := redis.NewClient(&redis.Options{Addr: nw.Addr(0, 0), MaxRetries: -1})
	defer app.Close()
	wctx, stopLeases := context.WithCancel(ctx)
	leases := make(chan struct{})
	go func() {
		defer close(leases)
		for n := 0; clock.Sleep(wctx, 5*time.Millisecond); n++ {
			app.Set(wctx, "t:lock:a", fmt.Sprint("owner-", n), time.Second)
		}
	}()
	before := c.Nodes[0].PID()
	notes = nil
	const ttl = 200 * time.Millisecond
	err = RestartRecipe(ttl, ttl*2/5).Run(ctx, nodes, 2*time.Second, "t:lock:*", note)
	stopLeases()
	<-leases
	if err != nil {
		t.Fatal(err)
	}
	if c.Nodes[0].PID() == before {
		t.Error("node 0 was not restarted")
	}
	for i, n := range c.Nodes {
		if !n.Running() {
			t.Errorf("after node-restart, node %d is down: every round starts the killed nodes again", i)
		}
	}
	rounds := 0
	for _, n := range notes {
		if strings.Contains(n, "node 0 restarted without data, nodes 3, 4 started empty") {
			rounds++
		}
		if !strings.Contains(n, "killed nodes 3, 4; a lease granted without them had just begun") {
			t.Errorf("each round should restart node 0 as a new lease begins there: %s", n)
		}
	}
	if rounds < 3 {
		t.Errorf("%d restart rounds in 2s with a %v TTL, want several:\n%s", rounds, ttl, strings.Join(notes, "\n"))
	}

	// A recipe that is cancelled stops at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	if err := RestartRecipe(ttl, ttl*2/5).Run(cctx, nodes, time.Minute, "t:lock:*", note); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > time.Second {
		t.Error("a cancelled recipe kept running")
	}
}
