package docs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/redisacl"
)

// operations.md.

// Flags, variables and Redis URLs quoted in operations.md are real.
func TestOperationsDoc(t *testing.T) {
	ops := read(t, "docs/operations.md")
	app, runner := binaries(t)
	af, lf := helpOf(t, app), helpOf(t, runner)
	for _, m := range regexp.MustCompile("`(-[a-z][a-z0-9-]*)").FindAllStringSubmatch(ops, -1) {
		name := strings.TrimPrefix(m[1], "-")
		if _, ok := af.takesValue[name]; ok {
			continue
		}
		if _, ok := lf.takesValue[name]; ok {
			continue
		}
		t.Errorf("operations.md quotes %s, a flag neither flashsale nor the load runner has", m[1])
	}
	for _, v := range regexp.MustCompile(`FLASHSALE_[A-Z0-9_]+`).FindAllString(ops, -1) {
		if v == redisacl.AppPasswordVar || v == redisacl.AdminPasswordVar {
			continue // the ACL file's, not the app's
		}
		if !af.env[v] {
			t.Errorf("operations.md names $%s, which `flashsale -h` does not know", v)
		}
	}
	urls := regexp.MustCompile("`(rediss?://[^`]+)`").FindAllStringSubmatch(ops, -1)
	if len(urls) < 4 {
		t.Errorf("operations.md gives only %d Redis URLs", len(urls))
	}
	for _, m := range urls {
		u := m[1]
		o, err := redis.ParseURL(u)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		if strings.HasPrefix(u, "rediss://") != (o.TLSConfig != nil) {
			t.Errorf("%s: TLS %v", u, o.TLSConfig != nil)
		}
		if strings.Contains(u, "flashsale:s3cret@") && (o.Username != "flashsale" || o.Password != "s3cret") {
			t.Errorf("%s: user %q password %q", u, o.Username, o.Password)
		}
		if strings.Contains(u, "//:s3cret@") && (o.Username != "" || o.Password != "s3cret") {
			t.Errorf("%s: user %q password %q", u, o.Username, o.Password)
		}
	}
	// An unknown query parameter is refused, as the page says.
	if _, err := redis.ParseURL("redis://h:6379/0?no_such_option=1"); err == nil {
		t.Error("go-redis accepts an unknown URL option; operations.md says it is refused")
	}
	// The users the page shows are the shipped ACL file's.
	var users []string
	for _, line := range strings.Split(redisacl.Rules, "\n") {
		if strings.HasPrefix(line, "user ") {
			users = append(users, line)
		}
	}
	if acl := strings.Join(users, "\n"); len(users) == 0 || !strings.Contains(ops, "```\n"+acl+"\n```") {
		t.Errorf("operations.md does not show the users of internal/redisacl/users.acl as they are:\n%s", acl)
	}
	// The figures the page quotes are the code's.
	for _, c := range []struct{ doc, file, code string }{
		{"TTL/20, at least 50 ms and at most TTL/3", "lock/options.go", "min(max(c.ttl/20, 50*time.Millisecond), c.ttl/3)"},
		{"drift = 1% of the TTL + 2 ms", "lock/redlock.go", "ttl/100 + 2*time.Millisecond"},
		{"extends itself every TTL/3", "lock/lease.go", "every := l.locker.cfg.ttl / 3"},
		{"at most 16 connections: 12 for the sales' transactions and 4 for the reads", "inventory/db.go", "postgres.Open(dsn), dsn, 12, log"},
		{"at most 16 connections: 12 for the sales' transactions and 4 for the reads", "inventory/db.go", "postgres.Open(dsn), dsn, 4, log"},
		{"answer (within 2 s)", "handlers/ops.go", "context.WithTimeout(c.Request.Context(), 2*time.Second)"},
		{"`flashsale:events`", "internal/broker/broker.go", `namespace + "events"`},
		{"`flashsale:lock:sku:<SKU>`", "inventory/sale.go", `"sku:"+p.SKU`},
		{"`flashsale:lock:seat:<event>:<seat>`", "inventory/seats.go", `"seat:" + r.Event + ":" + r.Seat`},
		{"`flashsale:fence:sku:<SKU>`", "lock/internal/keys/keys.go", `return ns + "fence:" + name`},
	} {
		if !strings.Contains(strings.Join(strings.Fields(ops), " "), c.doc) {
			t.Errorf("operations.md no longer says %q", c.doc)
		}
		if !strings.Contains(read(t, c.file), c.code) {
			t.Errorf("operations.md says %q, but %s no longer has %q", c.doc, c.file, c.code)
		}
	}
}
