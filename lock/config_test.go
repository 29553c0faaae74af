package lock_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// The library never changes a server's configuration. On nodes started
// without keyspace notifications, as a team's own nodes often are, two
// instances with the speed layer on contend for a lua and a Redlock key
// while MONITOR watches every node: no CONFIG command of any kind is sent,
// the nodes' notify-keyspace-events is still empty afterwards, the waiters
// are still served (they fall back to retrying after a delay), and the
// fallback is logged once per node, not once per wait.
func TestLibraryNeverConfiguresServers(t *testing.T) {
	c := testsupport.Redis(t, 3, localredis.Options{Args: []string{"--notify-keyspace-events", ""}})
	nodes := testsupport.Options(t, c)
	var mons []*monitorConn
	for _, o := range nodes {
		mons = append(mons, monitor(t, o.Addr))
	}
	var logs testsupport.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	e := newEnvOn(t, nodes, lock.Options{TTL: time.Second, Logger: logger})
	other := e.instance(lock.Options{TTL: time.Second, Logger: logger})
	e.voting()
	ctx := context.Background()
	contendAcross(ctx, t, e, other)
	// The probes log within a second of listening; the waits above took
	// longer than that.
	within(t, 5*time.Second, "the fallback was never logged", func() bool {
		return strings.Count(logs.String(), "publishes no keyspace events") >= len(nodes)
	})

	for i, r := range e.raw {
		// A marker command through the node's own client ends what the
		// monitor must read.
		end := "end-of-test-" + e.ns
		if err := r.Echo(ctx, end).Err(); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range mons[i].until(t, end) {
			if strings.HasPrefix(cmd, "config") {
				t.Errorf("node %d: the library sent %q", i, cmd)
			}
		}
		if got := notifications(t, r); got != "" {
			t.Errorf("node %d: notify-keyspace-events = %q, want it as the node was started: empty", i, got)
		}
	}
	// Once per node and Client, however many waits fell back.
	if n := strings.Count(logs.String(), "publishes no keyspace events"); n > 2*len(nodes) {
		t.Errorf("the fallback was logged %d times for %d nodes and two instances", n, len(nodes))
	}
}

// until reads the monitor until a command carries word, and returns every
// command before it, lower-cased, its words joined by spaces.
func (m *monitorConn) until(t *testing.T, word string) []string {
	t.Helper()
	var got []string
	for {
		line, err := m.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading MONITOR after %d commands: %v", len(got), err)
		}
		var words []string
		for _, q := range quoted.FindAllStringSubmatch(line, -1) {
			if q[1] == word {
				return got
			}
			words = append(words, strings.ToLower(q[1]))
		}
		got = append(got, strings.Join(words, " "))
	}
}

// Ready means granted: on fresh plain nodes (no keyspace notifications, no
// data marked by whoever started them), once Ping says a quorum would grant,
// the next acquires are granted — not refused because a node sits out or
// waits for its counters. Each round starts new nodes; the holder of every
// lease releases it before the next, so a refusal can only be the nodes'.
func TestReadyMeansGranted(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		c := testsupport.Redis(t, 5, localredis.Options{Args: []string{"--notify-keyspace-events", ""}, Unmarked: true})
		e := newEnvOn(t, testsupport.Options(t, c), lock.Options{TTL: 300 * time.Millisecond})
		e.voting()
		l := e.locker(lock.Redlock)
		for i := range 10 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			lease, err := l.TryAcquire(ctx, "k")
			cancel()
			if err != nil {
				t.Fatalf("round %d, acquire %d after Ping said ready: %v", round, i, err)
			}
			if err := lease.Release(context.Background()); err != nil {
				t.Fatalf("round %d, release %d: %v", round, i, err)
			}
		}
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}
