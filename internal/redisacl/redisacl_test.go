package redisacl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/redisacl"
	"flashsale/internal/testsupport"
)

func TestMain(m *testing.M) { os.Exit(testsupport.Main(m)) }

func TestFile(t *testing.T) {
	f, err := redisacl.File("app-pw", "admin-pw")
	if err != nil {
		t.Fatal(err)
	}
	s := string(f)
	for _, want := range []string{"user default off\n", "user flashsale on >app-pw ", "user flashsale-admin on >admin-pw "} {
		if !strings.Contains(s, want) {
			t.Errorf("File lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "#") || strings.Contains(s, "${") {
		t.Errorf("File keeps comments or variables:\n%s", s)
	}
	for _, bad := range [][2]string{{"", "x"}, {"x", ""}, {"a b", "x"}, {"x", "a#b"}, {"a\nuser evil on nopass +@all", "x"}} {
		if _, err := redisacl.File(bad[0], bad[1]); !errors.Is(err, redisacl.ErrPassword) {
			t.Errorf("File(%q, %q): %v, want ErrPassword", bad[0], bad[1], err)
		}
	}
}

// TestAdminCommandsRefused sends every command that can lose keys, hide a
// loss or take the node away, as the app's user: Redis refuses each with
// NOPERM. The same command as the admin user is not refused (most succeed;
// a few fail for a reason of their own, said in the table), so the
// refusal is the ACL's and not the command's.
func TestAdminCommandsRefused(t *testing.T) {
	nodes := testsupport.Redis(t, 1, localredis.Options{ACL: true, Args: []string{"--enable-debug-command", "yes"}})
	n := nodes.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	app, admin := client(t, n.URL()), client(t, n.AdminURL())
	if err := admin.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	dump, err := admin.Dump(ctx, "k").Result()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args     []any
		adminErr string // what the admin's run answers, when not OK
	}{
		{args: []any{"FLUSHALL"}},
		{args: []any{"FLUSHDB"}},
		{args: []any{"SWAPDB", "0", "1"}},
		{args: []any{"DEBUG", "SLEEP", "0"}},
		{args: []any{"CONFIG", "GET", "maxmemory"}},
		{args: []any{"CONFIG", "SET", "maxmemory-policy", "noeviction"}},
		{args: []any{"CONFIG", "RESETSTAT"}},
		{args: []any{"REPLICAOF", "NO", "ONE"}},
		{args: []any{"SLAVEOF", "NO", "ONE"}},
		{args: []any{"FAILOVER"}, adminErr: "requires connected replicas"},
		{args: []any{"SCRIPT", "FLUSH"}},
		{args: []any{"ACL", "SETUSER", "flashsale", "+@all"}, adminErr: "-"}, // run as the admin below, once the rest is done
		{args: []any{"ACL", "LIST"}},
		{args: []any{"MIGRATE", "127.0.0.1", "1", "nokey", "0", "100"}},
		{args: []any{"RESTORE", "restored", "0", dump}},
		{args: []any{"CLIENT", "KILL", "ID", "999999999"}},
		{args: []any{"KEYS", "*"}},
		{args: []any{"SAVE"}},
		{args: []any{"BGSAVE"}},
		{args: []any{"BGREWRITEAOF"}},
		{args: []any{"MONITOR"}, adminErr: "-"},
		{args: []any{"SHUTDOWN", "NOSAVE"}, adminErr: "-"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.args[:min(2, len(c.args))]), func(t *testing.T) {
			err := app.Do(ctx, c.args...).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
				t.Errorf("as %s: %v, want NOPERM", redisacl.AppUser, err)
			}
			if c.adminErr == "-" {
				return // not run as the admin: it would end the node or this test's connection
			}
			err = admin.Do(ctx, c.args...).Err()
			switch {
			case err != nil && strings.HasPrefix(err.Error(), "NOPERM"):
				t.Errorf("as %s: %v", redisacl.AdminUser, err)
			case c.adminErr == "" && err != nil:
				t.Errorf("as %s: %v, want OK", redisacl.AdminUser, err)
			case c.adminErr != "" && (err == nil || !strings.Contains(err.Error(), c.adminErr)):
				t.Errorf("as %s: %v, want an error with %q", redisacl.AdminUser, err, c.adminErr)
			}
		})
	}
	// The admin's side of the commands that end something, on a
	// connection of their own, the node's end last.
	if err := admin.Do(ctx, "ACL", "SETUSER", "probe", "on", "nopass", "+ping").Err(); err != nil {
		t.Errorf("ACL SETUSER as %s: %v", redisacl.AdminUser, err)
	}
	mon := client(t, n.AdminURL())
	if err := mon.Do(ctx, "MONITOR").Err(); err != nil {
		t.Errorf("MONITOR as %s: %v", redisacl.AdminUser, err)
	}
	if err := admin.Do(ctx, "SHUTDOWN", "NOSAVE").Err(); err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "EOF") {
		t.Errorf("SHUTDOWN as %s: %v", redisacl.AdminUser, err)
	}
	select {
	case <-n.Exited():
	case <-ctx.Done():
		t.Errorf("SHUTDOWN NOSAVE as %s: the node still runs", redisacl.AdminUser)
	}
}

func client(t *testing.T, rawURL string) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	o.MaxRetries = -1
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}
