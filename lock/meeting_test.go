//go:build unix

package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// A process meets node 2 while the node cannot answer its meeting for now:
// BUSY (a script past busy-reply-threshold) or LOADING (restarted from an
// RDB file, INFO answers, scripts do not). The connection must not vote
// blind to what happens later: node 2 is flushed while another client holds
// a lease on a bare quorum with it, and the process must not be granted
// that lease a second time. The control meets the node when it is quiet.
func TestMeetingFailsClosed(t *testing.T) {
	testsupport.Long(t, "nodes frozen, flushed or down for seconds")
	for _, tc := range []struct {
		name   string
		during func(t *testing.T, c *localredis.Cluster, meet func())
	}{
		{"busy", meetWhileBusy},
		{"loading", meetWhileLoading},
		{"control: a quiet meeting", func(_ *testing.T, _ *localredis.Cluster, meet func()) { meet() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Loading that takes seconds, answering LOADING meanwhile; BUSY
			// after a script's 20 ms (set at start: a CONFIG SET later is an
			// operator command, which keeps the node out for a sit-out).
			c := testsupport.Redis(t, 5, localredis.Options{Args: []string{"--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024", "--busy-reply-threshold", "20"}})
			const ttl = 4 * time.Second
			first := newEnv(t, c, lock.Options{TTL: ttl})
			first.aged(c) // marks every node's data, and waits until they are old
			// The second process starts, and so meets the nodes, during the
			// fault; then it takes a lock, which four nodes grant.
			var second *env
			tc.during(t, c, func() {
				second = newEnvOn(t, testsupport.Options(t, c), lock.Options{TTL: ttl, Namespace: first.ns, FastOff: true})
				warm, err := second.locker(lock.Redlock).TryAcquire(context.Background(), "warm")
				if err != nil {
					t.Fatalf("four nodes answer, yet: %v", err)
				}
				_ = warm.Release(context.Background())
			})
			first.aged(c) // a restarted node 2 sits out for the first process too
			held := first.bareQuorum("k", 3, 4)
			if err := first.raw[2].FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			grantedWhileHeld(t, second.locker(lock.Redlock), "k", held)
		})
	}
}

// meetWhileBusy runs meet while node 2 answers BUSY: a script that loops
// until SCRIPT KILL.
func meetWhileBusy(t *testing.T, c *localredis.Cluster, meet func()) {
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: c.Nodes[2].Addr()})
	defer admin.Close()
	looper := redis.NewClient(&redis.Options{Addr: c.Nodes[2].Addr(), ReadTimeout: -1})
	defer looper.Close()
	ended := make(chan error, 1)
	go func() { ended <- looper.Eval(ctx, "while true do end", nil).Err() }()
	waitAnswer(t, admin, "BUSY")
	meet()
	if err := admin.ScriptKill(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err == nil {
		t.Fatal("the busy script ended without being killed")
	}
}

// meetWhileLoading runs meet while node 2, restarted with its data, loads
// them from its RDB file.
func meetWhileLoading(t *testing.T, c *localredis.Cluster, meet func()) {
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: c.Nodes[2].Addr(), MaxRetries: -1})
	defer admin.Close()
	// 20,000 keys at 100 µs each: two seconds of loading.
	pipe := admin.Pipeline()
	for i := range 20000 {
		pipe.Set(ctx, "filler:"+strconv.Itoa(i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() { restarted <- c.Nodes[2].Restart(ctx, true) }()
	waitAnswer(t, admin, "LOADING")
	meet()
	// The meeting was sent after the load began; it ended before the load
	// did only if the node still loads now.
	if err := admin.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "LOADING") {
		t.Fatalf("node 2 finished loading before the second process had met it (%v): nothing shown", err)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
}

// waitAnswer waits until the node answers PING with an error that starts
// with code (through a restart: a connection error is not an answer).
func waitAnswer(t *testing.T, rdb *redis.Client, code string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := rdb.Ping(context.Background()).Err()
		if err != nil && strings.HasPrefix(err.Error(), code) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", code, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A node whose maxmemory-policy may evict keys does not vote: a lock key
// evicted before its TTL is a second holder. The policy is read at every
// meeting, so a node set to evict is left out from its next connection on,
// and counts again once set back to noeviction.
func TestEvictingNodeDoesNotVote(t *testing.T) {
	c := testsupport.Redis(t, 5, localredis.Options{})
	e := newEnv(t, c, lock.Options{FastOff: true})
	e.aged(c)
	l := e.locker(lock.Redlock)
	policy := func(p string) {
		t.Helper()
		for _, rdb := range e.raw[:3] {
			if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", p).Err(); err != nil {
				t.Fatal(err)
			}
			// Every connection meets the node again.
			if err := rdb.ClientKillByFilter(context.Background(), "TYPE", "normal").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	policy("allkeys-lru")
	_, err := l.TryAcquire(context.Background(), "k")
	if !errors.Is(err, lock.ErrUnavailable) || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("three of five nodes may evict keys, yet: %v", err)
	}
	policy("noeviction")
	deadline := time.Now().Add(5 * time.Second)
	for {
		lease, err := l.TryAcquire(context.Background(), "k")
		if err == nil {
			_ = lease.Release(context.Background())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("back to noeviction, still: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
