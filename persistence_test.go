package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"flashsale/internal/testsupport"
)

// The persistence lab on the embedded default (docs/workshop.md, Lab 9): a
// local node killed with SIGKILL comes back on its own port and files, with
// the lock key when -local-aof is on and without it when it is off.
func TestLocalNodeKilledComesBackOnItsFiles(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	testsupport.Need(t, "redis-server", "kill a local node with SIGKILL")
	const key = "flashsale:lock:sku:demo"
	for _, c := range []struct {
		name string
		args []string
		kept bool
	}{
		{"aof-always", []string{"-local-aof", "-local-fsync", "always"}, true},
		{"aof-everysec", []string{"-local-aof"}, true},
		{"no-aof", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dir := t.TempDir()
			t.Setenv("TMPDIR", dir) // where the local nodes keep their files, their ACL among them
			out, stderr := &testsupport.SyncBuffer{}, &testsupport.SyncBuffer{}
			done := make(chan error, 1)
			args := append([]string{"flashsale", "-addr", "127.0.0.1:0", "-local-nodes", "1", "-lock-ttl", "200ms"}, c.args...)
			go func() {
				done <- run(ctx, args, func(k string) string {
					return map[string]string{"FLASHSALE_DB": dir + "/sale.db"}[k]
				}, out, stderr)
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run: %v", err)
				}
			}()
			started := regexp.MustCompile(`localredis: node started" node=0 addr=(\S+) pid=(\d+) aof=(\w+)`)
			// waitFor returns the n-th start line of node 0 (the first is the
			// start, the next a start after the kill), or fails.
			waitFor := func(n int) []string {
				t.Helper()
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if m := started.FindAllStringSubmatch(stderr.String(), -1); len(m) >= n {
						return m[n-1]
					}
				}
				t.Fatalf("node 0 did not start %d times:\n%s", n, stderr)
				return nil
			}
			// Serving: the start-up (nodes ageing, the sale seeded) is over,
			// so a cancel at the end is a clean shutdown.
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "listening on"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("not listening:\n%s\n%s", out, stderr)
				}
			}
			first := waitFor(1)
			if first[3] != strconv.FormatBool(c.kept) {
				t.Fatalf("node 0 started with aof=%s, want %v", first[3], c.kept)
			}
			// The nodes take logins (the project's ACL): the test writes and
			// reads as the admin user, whose password is in node 0's file.
			files, err := filepath.Glob(filepath.Join(dir, "localredis-*", "node-0", "users.acl"))
			if err != nil || len(files) != 1 {
				t.Fatalf("node 0's ACL file: %v %v", files, err)
			}
			rdb := adminClient(t, files[0])
			if rdb.Options().Addr != first[1] {
				t.Fatalf("node 0's files name %s, its start line %s", rdb.Options().Addr, first[1])
			}
			if err := rdb.Set(ctx, key, "me", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(first[2])
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			again := waitFor(2)
			if again[1] != first[1] || again[2] == first[2] {
				t.Fatalf("after the kill node 0 is %s pid %s; want the same address %s and a new process", again[1], again[2], first[1])
			}
			ttl, err := rdb.PTTL(ctx, key).Result()
			switch {
			case err != nil:
				t.Fatal(err)
			case c.kept && (ttl <= 0 || ttl >= time.Minute):
				t.Errorf("with the append-only file the lock should survive with its TTL running; PTTL %v", ttl)
			case !c.kept && ttl != -2:
				t.Errorf("without persistence the lock should be gone (PTTL -2); PTTL %v", ttl)
			}
		})
	}
}
