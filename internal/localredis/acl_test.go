package localredis

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/redisacl"
)

// TestACL: nodes started with the ACL take the app's user on URL and the
// admin's on AdminURL, each with a password of this cluster; the app's
// user cannot reconfigure the node, the admin can; the package's own reads
// (the age of the nodes) and a restart that wipes the node's directory go
// on working; the keyspace events stay in the node's configuration.
func TestACL(t *testing.T) {
	requireRedis(t)
	c := startCluster(t, 2, Options{ACL: true})
	other := startCluster(t, 1, Options{ACL: true})
	if !c.ACL() {
		t.Fatal("ACL() = false for redis-server nodes started with Options.ACL")
	}
	n := c.Nodes[0]
	app, admin := userOf(t, n.URL()), userOf(t, n.AdminURL())
	if app.Username() != redisacl.AppUser || admin.Username() != redisacl.AdminUser {
		t.Fatalf("URL user %q, AdminURL user %q", app.Username(), admin.Username())
	}
	appPW, _ := app.Password()
	adminPW, _ := admin.Password()
	otherPW, _ := userOf(t, other.Nodes[0].URL()).Password()
	if appPW == adminPW || appPW == otherPW || len(appPW) < 32 {
		t.Fatalf("passwords not random per cluster and user: app %q admin %q other cluster's app %q", appPW, adminPW, otherPW)
	}
	if got := c.AdminURLs(); len(got) != 2 || got[1] != c.Nodes[1].AdminURL() {
		t.Errorf("AdminURLs() = %v", got)
	}

	ctx := t.Context()
	anon := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING as the default user: %v, want NOAUTH", err)
	}
	if err := client(t, n).Do(ctx, "CONFIG", "GET", "notify-keyspace-events").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Errorf("CONFIG GET as the app: %v, want NOPERM", err)
	}
	events := func() string {
		t.Helper()
		o, err := redis.ParseURL(n.AdminURL())
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(o)
		defer rdb.Close()
		kv, err := rdb.ConfigGet(ctx, "notify-keyspace-events").Result()
		if err != nil {
			t.Fatalf("CONFIG GET as the admin: %v", err)
		}
		return kv["notify-keyspace-events"]
	}
	for _, f := range "Kgx" {
		if !strings.ContainsRune(events(), f) {
			t.Errorf("notify-keyspace-events = %q, lacks %c", events(), f)
		}
	}

	if err := n.Restart(ctx, false); err != nil {
		t.Fatalf("restart without data: %v", err)
	}
	mustPing(t, n)
	if err := c.Aged(ctx, time.Second); err != nil {
		t.Errorf("Aged as the admin: %v", err)
	}
}

func TestACLOptions(t *testing.T) {
	if _, err := Start(t.Context(), 1, Options{ACL: true, Password: "x", InProcess: true}); err == nil {
		t.Error("Options.ACL with Options.Password: no error")
	}
	c := startCluster(t, 1, Options{ACL: true, InProcess: true})
	if c.ACL() || strings.Contains(c.Nodes[0].URL(), "@") || c.Nodes[0].AdminURL() != c.Nodes[0].URL() {
		t.Errorf("in-process nodes have no ACL: ACL() %v, URL %q, AdminURL %q", c.ACL(), c.Nodes[0].URL(), c.Nodes[0].AdminURL())
	}
	mustPing(t, c.Nodes[0])
}

func userOf(t *testing.T, raw string) *url.Userinfo {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		t.Fatalf("URL %q: %v, no user", raw, err)
	}
	return u.User
}
