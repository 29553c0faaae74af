//go:build unix

package localredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// requireRedis skips real-process tests where redis-server is missing, except
// in CI, where a missing binary is a broken setup that must fail loudly. CI
// is recognised as testsupport.CI does; this package's own tests cannot
// import testsupport, which is built on it.
func requireRedis(t *testing.T) {
	t.Helper()
	if Available() {
		return
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatal("redis-server not on PATH (CI is set): install it, real-process tests must run in CI")
	}
	t.Skip("redis-server not on PATH")
}

func startCluster(t *testing.T, n int, opts Options) *Cluster {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	c, err := Start(ctx, n, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Cluster.Stop: %v", err)
		}
	})
	return c
}

// client returns a fresh client, so no pooled connection from before a
// restart hides what the node does now.
func client(t *testing.T, n *Node) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(n.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", n.URL(), err)
	}
	opt.ContextTimeoutEnabled = true // let a 200ms ctx cut a read from a paused node short
	opt.MaxRetries = -1
	opt.DialTimeout = time.Second
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// ping reports the error of one PING bounded by d.
func ping(t *testing.T, n *Node, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return client(t, n).Ping(ctx).Err()
}

func mustPing(t *testing.T, n *Node) {
	t.Helper()
	if err := ping(t, n, 2*time.Second); err != nil {
		t.Fatalf("node %d: PING: %v", n.Index(), err)
	}
}

func mustNotPing(t *testing.T, n *Node) {
	t.Helper()
	start := time.Now()
	if err := ping(t, n, 200*time.Millisecond); err == nil {
		t.Fatalf("node %d: PING succeeded, want failure", n.Index())
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("node %d: failing PING took %v, want it bounded by its 200ms context", n.Index(), d)
	}
}

func exists(t *testing.T, n *Node, key string) bool {
	t.Helper()
	c, err := client(t, n).Exists(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("node %d: EXISTS %s: %v", n.Index(), key, err)
	}
	return c == 1
}

func set(t *testing.T, n *Node, key, val string) {
	t.Helper()
	if err := client(t, n).Set(t.Context(), key, val, 0).Err(); err != nil {
		t.Fatalf("node %d: SET %s: %v", n.Index(), key, err)
	}
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestRealCluster(t *testing.T) {
	requireRedis(t)
	c := startCluster(t, 3, Options{})
	if c.InProcess() {
		t.Fatal("InProcess() = true with redis-server on PATH")
	}
	seen := map[string]bool{}
	for i, a := range c.Addrs() {
		if seen[a] || !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("Addrs()[%d] = %q: want distinct loopback addresses, got %v", i, a, c.Addrs())
		}
		seen[a] = true
		if want := "redis://" + a; c.URLs()[i] != want {
			t.Errorf("URLs()[%d] = %q, want %q", i, c.URLs()[i], want)
		}
		if c.Nodes[i].PID() == 0 || !c.Nodes[i].Running() {
			t.Errorf("node %d: PID %d, Running %v after Start", i, c.Nodes[i].PID(), c.Nodes[i].Running())
		}
	}
	pids := make([]int, len(c.Nodes))
	for i, n := range c.Nodes {
		pids[i] = n.PID()
	}

	t.Run("keys are independent per node", func(t *testing.T) {
		for i, n := range c.Nodes {
			set(t, n, "k", "node-"+string(rune('0'+i)))
		}
		set(t, c.Nodes[0], "only-on-0", "x")
		for i, n := range c.Nodes {
			got, err := client(t, n).Get(t.Context(), "k").Result()
			if want := "node-" + string(rune('0'+i)); err != nil || got != want {
				t.Errorf("node %d: GET k = %q, %v; want %q", i, got, err, want)
			}
			if want := i == 0; exists(t, n, "only-on-0") != want {
				t.Errorf("node %d: EXISTS only-on-0 = %v, want %v", i, !want, want)
			}
		}
	})

	t.Run("keyspace notifications Kgx", func(t *testing.T) {
		for _, n := range c.Nodes {
			rdb := client(t, n)
			v, err := rdb.ConfigGet(t.Context(), "notify-keyspace-events").Result()
			if err != nil {
				t.Fatalf("node %d: CONFIG GET: %v", n.Index(), err)
			}
			for _, f := range "Kgx" {
				if !strings.ContainsRune(v["notify-keyspace-events"], f) {
					t.Errorf("node %d: notify-keyspace-events = %q, missing %q", n.Index(), v["notify-keyspace-events"], f)
				}
			}
		}
		// And the event a lock waiter listens for actually arrives.
		n := c.Nodes[0]
		sub := client(t, n).Subscribe(t.Context(), "__keyspace@0__:gone")
		defer sub.Close()
		if _, err := sub.Receive(t.Context()); err != nil {
			t.Fatalf("SUBSCRIBE: %v", err)
		}
		set(t, n, "gone", "1")
		if err := client(t, n).Del(t.Context(), "gone").Err(); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		select {
		case m := <-sub.Channel():
			if m.Payload != "del" {
				t.Errorf("keyspace event = %q, want del", m.Payload)
			}
		case <-time.After(2 * time.Second):
			t.Error("no keyspace event for DEL")
		}
	})

	t.Run("kill then start comes back empty on the same port", func(t *testing.T) {
		n := c.Nodes[1]
		addr, pid := n.Addr(), n.PID()
		set(t, n, "lost", "v")
		if err := n.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		if n.Running() || n.PID() != 0 || !processGone(pid) {
			t.Fatalf("after Kill: Running %v, PID %d, process %d gone %v", n.Running(), n.PID(), pid, processGone(pid))
		}
		mustNotPing(t, n)
		if err := n.Kill(); err != nil {
			t.Errorf("second Kill: %v", err)
		}
		if err := n.Start(t.Context()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		mustPing(t, n)
		if n.Addr() != addr || n.PID() == pid {
			t.Errorf("after Start: addr %s pid %d, want addr %s and a new pid (old %d)", n.Addr(), n.PID(), addr, pid)
		}
		if exists(t, n, "lost") {
			t.Error("key survived Kill+Start without AOF")
		}
		pids[1] = n.PID()
	})

	t.Run("graceful stop then start", func(t *testing.T) {
		n := c.Nodes[0]
		pid := n.PID()
		if err := n.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if !processGone(pid) {
			t.Fatalf("pid %d still exists after Stop", pid)
		}
		mustNotPing(t, n)
		if err := n.Stop(t.Context()); err != nil {
			t.Errorf("Stop on a stopped node: %v", err)
		}
		if err := n.Start(t.Context()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		mustPing(t, n)
		pids[0] = n.PID()
	})

	t.Run("pause freezes, resume thaws", func(t *testing.T) {
		n := c.Nodes[2]
		set(t, n, "frozen", "v")
		if err := n.Pause(); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		mustNotPing(t, n)
		if !n.Running() || n.PID() == 0 {
			t.Errorf("paused node: Running %v PID %d, want running", n.Running(), n.PID())
		}
		if err := n.Resume(); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		mustPing(t, n)
		if !exists(t, n, "frozen") {
			t.Error("key lost across Pause/Resume")
		}
	})

	t.Run("stop removes temp dir and processes", func(t *testing.T) {
		// Leave one node paused and one killed: Stop must cope with both.
		if err := c.Nodes[2].Pause(); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		if err := c.Nodes[1].Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		root := c.root
		if _, err := os.Stat(root); err != nil {
			t.Fatalf("temp dir before Stop: %v", err)
		}
		start := time.Now()
		if err := c.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Stop took %v; a paused node should get SIGCONT and exit on SIGTERM", d)
		}
		if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temp dir %s after Stop: %v, want it gone", root, err)
		}
		for i, pid := range pids {
			if !processGone(pid) {
				t.Errorf("node %d: pid %d still exists after Stop", i, pid)
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		if err := c.Nodes[0].Start(t.Context()); err == nil {
			t.Error("Node.Start after Cluster.Stop succeeded, want error")
		}
	})
}

// TestRestartData runs the persistence cases against real processes and
// against in-process nodes, whose AOF emulation must behave the same.
func TestRestartData(t *testing.T) {
	restart := func(keep bool) func(context.Context, *Node) error {
		return func(ctx context.Context, n *Node) error { return n.Restart(ctx, keep) }
	}
	stopStart := func(ctx context.Context, n *Node) error {
		if err := n.Stop(ctx); err != nil {
			return err
		}
		return n.Start(ctx)
	}
	cases := []struct {
		name     string
		opts     Options
		op       func(context.Context, *Node) error
		wantKept bool
	}{
		{"AOF restart wiping data", Options{AOF: true}, restart(false), false},
		{"AOF always restart keeping data", Options{AOF: true, AppendFsync: "always"}, restart(true), true},
		{"AOF graceful stop and start", Options{AOF: true}, stopStart, true},
		{"no AOF restart keeping dir", Options{}, restart(true), false},
	}
	for _, inProcess := range []bool{false, true} {
		for _, tc := range cases {
			name := tc.name
			if inProcess {
				name = "in-process " + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if !inProcess {
					requireRedis(t)
				}
				opts := tc.opts
				opts.InProcess = inProcess
				c := startCluster(t, 1, opts)
				n := c.Nodes[0]
				addr := n.Addr()
				set(t, n, "durable", "v")
				if err := tc.op(t.Context(), n); err != nil {
					t.Fatalf("op: %v", err)
				}
				if n.Addr() != addr {
					t.Errorf("addr changed: %s -> %s", addr, n.Addr())
				}
				if got := exists(t, n, "durable"); got != tc.wantKept {
					t.Errorf("key kept = %v, want %v", got, tc.wantKept)
				}
			})
		}
	}
}

func TestPassword(t *testing.T) {
	requireRedis(t)
	const pw = "p@ss:w/rd"
	c := startCluster(t, 1, Options{Password: pw})
	n := c.Nodes[0]
	if !strings.Contains(n.URL(), "@127.0.0.1:") {
		t.Fatalf("URL() = %q, want credentials", n.URL())
	}
	mustPing(t, n) // client() parses the URL, so this proves the escaping
	anon := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer anon.Close()
	if err := anon.Ping(t.Context()).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without password: %v, want NOAUTH", err)
	}
}

func TestStartErrors(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		opts    Options
		wantErr string
	}{
		{"no nodes", 0, Options{InProcess: true}, "at least one node"},
		{"bad fsync", 1, Options{InProcess: true, AppendFsync: "sometimes"}, "AppendFsync"},
		{"missing binary", 1, Options{Binary: "/nonexistent/redis-server"}, "Options.Binary"},
		{"binary that exits", 1, Options{Binary: "/bin/false"}, "did not come up"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
			c, err := Start(t.Context(), tc.n, tc.opts)
			if err == nil {
				c.Stop()
				t.Fatal("Start succeeded, want error")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q, want it to mention %q", err, tc.wantErr)
			}
			t.Logf("error: %v", err)
		})
	}
}

// TestStartOnTakenPort: a node whose port was taken while it was down fails
// fast with redis' own explanation, instead of polling for 10s or, worse,
// talking to whoever holds the port.
func TestStartOnTakenPort(t *testing.T) {
	requireRedis(t)
	c := startCluster(t, 1, Options{})
	n := c.Nodes[0]
	if err := n.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	l, err := net.Listen("tcp", n.Addr())
	if err != nil {
		t.Fatalf("take port: %v", err)
	}
	defer l.Close()
	start := time.Now()
	err = n.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("Start on a taken port: %v, want an error quoting the log", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("failing Start took %v", d)
	}
	if n.Running() {
		t.Error("Running after failed Start")
	}
	t.Logf("error: %v", err)
	l.Close()
	if err := n.Start(t.Context()); err != nil {
		t.Fatalf("Start after port freed: %v", err)
	}
	mustPing(t, n)
}

func TestInProcess(t *testing.T) {
	c := startCluster(t, 2, Options{InProcess: true})
	if !c.InProcess() {
		t.Fatal("InProcess() = false with Options.InProcess")
	}
	for _, n := range c.Nodes {
		if n.PID() != 0 || !n.Running() {
			t.Fatalf("node %d: PID %d Running %v, want 0 and true", n.Index(), n.PID(), n.Running())
		}
	}
	set(t, c.Nodes[0], "only-on-0", "x")
	if exists(t, c.Nodes[1], "only-on-0") {
		t.Error("key set on node 0 visible on node 1")
	}

	t.Run("PX expires in real time", func(t *testing.T) {
		n := c.Nodes[0]
		rdb := client(t, n)
		start := time.Now()
		if err := rdb.Set(t.Context(), "ttl", "v", 100*time.Millisecond).Err(); err != nil {
			t.Fatalf("SET PX: %v", err)
		}
		if !exists(t, n, "ttl") {
			t.Fatal("key gone right after SET PX 100")
		}
		deadline := start.Add(2 * time.Second)
		for exists(t, n, "ttl") {
			if time.Now().After(deadline) {
				t.Fatal("key with PX 100 still there after 2s: TTLs do not follow real time")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if d := time.Since(start); d < 90*time.Millisecond {
			t.Errorf("key expired after %v, want about 100ms", d)
		}
	})

	t.Run("lock primitives", func(t *testing.T) {
		rdb := client(t, c.Nodes[1])
		script := redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`)
		if got, err := script.Run(t.Context(), rdb, []string{"lock"}, "a", 5000).Result(); err != nil || got != "OK" {
			t.Fatalf("first EVAL SET NX PX = %v, %v; want OK", got, err)
		}
		if _, err := script.Run(t.Context(), rdb, []string{"lock"}, "b", 5000).Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("second EVAL SET NX PX: %v, want nil reply", err)
		}
		sub := rdb.PSubscribe(t.Context(), "wake:*")
		defer sub.Close()
		if _, err := sub.Receive(t.Context()); err != nil {
			t.Fatalf("PSUBSCRIBE: %v", err)
		}
		if err := rdb.Publish(t.Context(), "wake:lock", "released").Err(); err != nil {
			t.Fatalf("PUBLISH: %v", err)
		}
		select {
		case m := <-sub.Channel():
			if m.Channel != "wake:lock" || m.Payload != "released" {
				t.Errorf("got %s %q", m.Channel, m.Payload)
			}
		case <-time.After(2 * time.Second):
			t.Error("no message via PSUBSCRIBE")
		}
	})

	t.Run("stop and start", func(t *testing.T) {
		n := c.Nodes[0]
		addr := n.Addr()
		set(t, n, "lost", "v")
		if err := n.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if n.Running() {
			t.Error("Running after Stop")
		}
		mustNotPing(t, n)
		if err := n.Start(t.Context()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		mustPing(t, n)
		if n.Addr() != addr {
			t.Errorf("addr changed: %s -> %s", addr, n.Addr())
		}
		if exists(t, n, "lost") {
			t.Error("key survived Stop+Start without AOF")
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		n := c.Nodes[1]
		if err := n.Pause(); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		mustNotPing(t, n)
		if err := n.Resume(); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		mustPing(t, n)
	})

	t.Run("kill while paused", func(t *testing.T) {
		n := c.Nodes[1]
		if err := n.Pause(); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		// A command parked in the pause must not keep Kill waiting.
		rdb := client(t, n)
		parked := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			parked <- rdb.Ping(ctx).Err()
		}()
		time.Sleep(50 * time.Millisecond)
		if err := n.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		if err := <-parked; err == nil {
			t.Error("PING parked in a paused node answered after Kill")
		}
		if err := n.Start(t.Context()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		mustPing(t, n)
	})

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, n := range c.Nodes {
		if n.Running() {
			t.Errorf("node %d running after Cluster.Stop", n.Index())
		}
	}
}

// TestNodesDieWithParent: a test binary that exits without Cluster.Stop (a
// crash, a Fatal in TestMain) must not leave redis-servers behind.
func TestNodesDieWithParent(t *testing.T) {
	if os.Getenv("LOCALREDIS_ORPHAN_CHILD") == "1" {
		c, err := Start(context.Background(), 2, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		for _, n := range c.Nodes {
			fmt.Println("PID", n.PID())
		}
		os.Exit(0) // no Stop, no cleanup of the temp dir: a crash
	}
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal is Linux-only")
	}
	requireRedis(t)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestNodesDieWithParent$")
	cmd.Env = append(os.Environ(), "LOCALREDIS_ORPHAN_CHILD=1", "TMPDIR="+t.TempDir(), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var pids []int
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PID "); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("child output %q: %v", line, err)
			}
			pids = append(pids, pid)
		}
	}
	if len(pids) != 2 {
		t.Fatalf("child printed %d PIDs, want 2:\n%s", len(pids), out)
	}
	// Orphans are reparented to PID 1, which may reap them late (or, in some
	// containers, never): a zombie counts as dead.
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for !processGone(pid) {
			if s, ok := procState(pid); ok && s == 'Z' {
				break
			}
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("redis-server %d outlived its parent", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestFallbackWithoutBinary: with no redis-server on PATH, Start still works,
// in-process, and says so.
func TestFallbackWithoutBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if Available() {
		t.Fatal("Available() with an empty PATH")
	}
	var logs strings.Builder
	c := startCluster(t, 1, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !c.InProcess() {
		t.Fatal("InProcess() = false without redis-server")
	}
	if !strings.Contains(logs.String(), "not found on PATH") {
		t.Errorf("fallback not logged; logs:\n%s", logs.String())
	}
	mustPing(t, c.Nodes[0])
}

// Exited tells a watcher that a node's process is gone, also when it was
// killed from outside; after Start it watches the new process.
func TestExited(t *testing.T) {
	requireRedis(t)
	c := startCluster(t, 1, Options{})
	n := c.Nodes[0]
	exited := n.Exited()
	select {
	case <-exited:
		t.Fatal("Exited is closed while the node runs")
	default:
	}
	if err := syscall.Kill(n.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("Exited not closed 10s after a kill -9")
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Exited():
		t.Fatal("Exited is closed for the new process")
	default:
	}
}
