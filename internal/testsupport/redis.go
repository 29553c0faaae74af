package testsupport

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
)

// RequireRedis marks the test as Missing redis-server when it is not on PATH.
func RequireRedis(tb testing.TB) {
	tb.Helper()
	if !localredis.Available() {
		Missing(tb, "redis-server is not on PATH")
	}
}

// Redis starts n independent redis-server nodes on free loopback ports and
// stops them when the test ends. opts may set persistence or a password; its
// Logger defaults to Logger().
//
// It returns once the nodes have run for RedisAge: a Redlock with restart
// awareness does not let a node vote before its uptime, which INFO gives in
// whole seconds, reaches the lock TTL plus drift (for the default 2 s TTL,
// 2.02 s: 3 whole seconds). Tests with a longer TTL wait longer themselves.
func Redis(tb testing.TB, n int, opts ...localredis.Options) *localredis.Cluster {
	tb.Helper()
	RequireRedis(tb)
	var o localredis.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Logger == nil {
		o.Logger = Logger()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := localredis.Start(ctx, n, o)
	if err != nil {
		tb.Fatalf("start %d redis nodes: %v", n, err)
	}
	if err := c.Aged(ctx, RedisAge); err != nil {
		_ = c.Stop()
		tb.Fatalf("new redis nodes: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("stop redis nodes: %v", err)
		}
	})
	return c
}

// RedisAge is how long Redis lets new nodes run before it returns, as their
// whole-second uptime tells: enough for a Redlock with the default 2 s TTL
// to count them (lock.MinUptime: TTL + drift, plus the second a
// whole-second uptime can overstate).
const RedisAge = 4 * time.Second

// Options are go-redis options for every node of c, first node first.
func Options(tb testing.TB, c *localredis.Cluster) []*redis.Options {
	tb.Helper()
	out, err := ClientOptions(c)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// ClientOptions are go-redis options for every node of c, first node first,
// for callers without a testing.TB.
func ClientOptions(c *localredis.Cluster) ([]*redis.Options, error) {
	out := make([]*redis.Options, 0, len(c.Nodes))
	for _, u := range c.URLs() {
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", u, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// RedisProcess is one redis-server started with arguments of the test's
// own (a configuration taken from a file under test, TLS, an ACL), where
// localredis's defaults would not do.
type RedisProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	out    *SyncBuffer
}

// RedisServer starts redis-server with args and waits until it is ready to
// accept connections. It is stopped with SIGTERM, by PID, when the test ends.
func RedisServer(tb testing.TB, args ...string) *RedisProcess {
	tb.Helper()
	bin := Need(tb, "redis-server", "run a Redis node")
	p := &RedisProcess{cmd: exec.Command(bin, args...), exited: make(chan struct{}), out: &SyncBuffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	tb.Cleanup(func() { p.Stop(syscall.SIGTERM) })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.out.String(), "Ready to accept connections") {
		select {
		case <-p.exited:
			tb.Fatalf("redis-server %s exited at start-up:\n%s", strings.Join(args, " "), p.out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redis-server not ready after 10s:\n%s", p.out)
		}
	}
	return p
}

// Stop sends sig to the process, by PID, and waits for it to exit; after
// 10 s it kills it. A process that has exited already is left alone.
func (p *RedisProcess) Stop(sig syscall.Signal) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Output is what the process has written so far.
func (p *RedisProcess) Output() string { return p.out.String() }

// SyncBuffer is a bytes.Buffer that a process's output and the test may use
// at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Clients are go-redis clients of every node of c, first node first,
// closed when the test ends.
func Clients(tb testing.TB, c *localredis.Cluster) []*redis.Client {
	tb.Helper()
	var out []*redis.Client
	for _, o := range Options(tb, c) {
		rdb := redis.NewClient(o)
		tb.Cleanup(func() { _ = rdb.Close() })
		out = append(out, rdb)
	}
	return out
}
