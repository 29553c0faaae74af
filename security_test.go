package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"flashsale/internal/testsupport"
)

// -h, and the usage a mistyped flag prints, show a PostgreSQL URL from the
// environment with its password masked; a plain file is shown as it is.
func TestHelpMasksTheDatabasePassword(t *testing.T) {
	cases := []struct {
		name, dsn, shown, hidden string
	}{
		{"password", "postgres://shop:s3cret-pw@db.internal:5432/sale", "postgres://shop:xxxxx@db.internal:5432/sale", "s3cret-pw"},
		{"password with @", "postgres://shop:p@ss-word@db.internal/sale", "postgres://shop:xxxxx@db.internal/sale", "p@ss-word"},
		{"password parameter", "postgres://shop@db.internal/sale?sslmode=disable&password=q-secret", "password=xxxxx", "q-secret"},
		{"key=value", "host=db.internal user=shop password='kv secret'", "password=xxxxx", "kv secret"},
		{"the control: a file", "/srv/sale.db", "/srv/sale.db", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, args := range [][]string{{"flashsale", "-h"}, {"flashsale", "-no-such-flag"}} {
				var out strings.Builder
				err := run(context.Background(), args, func(k string) string { return map[string]string{"FLASHSALE_DB": c.dsn}[k] }, io.Discard, &out)
				if args[1] == "-h" && err != nil || args[1] != "-h" && err == nil {
					t.Fatalf("%v: %v", args, err)
				}
				if !strings.Contains(out.String(), c.shown) {
					t.Errorf("%v does not show %q:\n%s", args, c.shown, grep(out.String(), "-db"))
				}
				if c.hidden != "" && strings.Contains(out.String(), c.hidden) {
					t.Errorf("%v prints the password %q:\n%s", args, c.hidden, grep(out.String(), "-db"))
				}
			}
		})
	}
	if _, err := parseConfig([]string{"flashsale", "-h"}, func(string) string { return "" }, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// grep is the lines of s that hold sub.
func grep(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, strings.TrimRight(l, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

// A database that cannot be reached is reported with where it is, never
// with its passwords.
func TestUnreachableDatabaseMasksItsPasswords(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	nodes := testsupport.Redis(t, 1)
	dsn := "postgres://shop:p@ss-word@" + addr + "/sale?sslmode=disable&connect_timeout=5&password=q-secret"
	var stderr testsupport.SyncBuffer
	err = run(context.Background(), []string{"flashsale", "-addr", "127.0.0.1:0", "-admin-token", adminToken, "-redis", nodes.URLs()[0], "-db", dsn},
		func(string) string { return "" }, io.Discard, &stderr)
	if err == nil {
		t.Fatal("run served on a database nobody listens for")
	}
	said := err.Error() + "\n" + stderr.String()
	if !strings.Contains(said, addr) {
		t.Errorf("the error does not say where the database was: %v", err)
	}
	for _, secret := range []string{"p@ss-word", "ss-word", "q-secret"} {
		if strings.Contains(said, secret) {
			t.Errorf("the output holds %q:\n%s", secret, said)
		}
	}
}

// The first start prints the token it generated; a restart that reuses the
// kept token says where it is and does not print it again.
func TestKeptTokenIsNotPrintedAgain(t *testing.T) {
	nodes := testsupport.Redis(t, 3)
	db := filepath.Join(t.TempDir(), "sale.db")
	argv := []string{"flashsale", "-addr", "127.0.0.1:0", "-redis", strings.Join(nodes.URLs(), ","), "-db", db}
	first := startArgv(t, nil, argv)
	m := regexp.MustCompile(`admin token \(generated[^)]*\): ([0-9a-f]{32})`).FindStringSubmatch(first.stdout.String())
	if m == nil {
		t.Fatalf("the first start printed no generated token:\n%s", first.stdout)
	}
	token := m[1]
	if err := first.shutdown(); err != nil {
		t.Fatal(err)
	}
	again := startArgv(t, nil, argv)
	out := again.stdout.String()
	if strings.Contains(out, token) {
		t.Errorf("the restart printed the kept token:\n%s", out)
	}
	if !strings.Contains(out, db+tokenSuffix) {
		t.Errorf("the restart does not say where the token is kept:\n%s", out)
	}
	again.mustCall("GET", "/api/admin/faults", "", 200, "Authorization", "Bearer "+token)
}

// A short -admin-token is refused with what to do; one of the minimum
// length serves (every other test here starts with a longer one).
func TestAdminTokenMinimumLength(t *testing.T) {
	for _, tok := range []string{"t", "t0ken", strings.Repeat("x", minAdminToken-1)} {
		err := run(context.Background(), []string{"flashsale", "-admin-token", tok}, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "at least 16") {
			t.Errorf("-admin-token %q: %v, want a refusal asking for at least 16 characters", tok, err)
		}
	}
	env := map[string]string{"FLASHSALE_ADMIN_TOKEN": "short"}
	if _, err := parseConfig([]string{"flashsale"}, func(k string) string { return env[k] }, io.Discard); err == nil {
		t.Error("FLASHSALE_ADMIN_TOKEN=short: no error")
	}
	if c, err := parseConfig([]string{"flashsale", "-admin-token", strings.Repeat("x", minAdminToken)}, func(string) string { return "" }, io.Discard); err != nil || len(c.adminToken) != minAdminToken {
		t.Errorf("a token of %d characters: %v", minAdminToken, err)
	}
}

// A SQLite file the instance creates is its owner's only, and so are the
// files SQLite keeps beside it; a file that was there is left as it was.
func TestDatabaseFileIsPrivate(t *testing.T) {
	nodes := testsupport.Redis(t, 3)
	dir := t.TempDir()
	fresh, existing := filepath.Join(dir, "fresh.db"), filepath.Join(dir, "existing.db")
	if err := os.WriteFile(existing, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	for _, db := range []string{fresh, existing} {
		app := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", db)
		app.reset("")
		app.mustCall("POST", "/api/orders", `{"sku":"tee","qty":1,"user":"ann"}`, 201)
		if err := app.shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(fresh + "*")
	if len(files) == 0 {
		t.Fatal("no database file")
	}
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %v, want none for group and others", filepath.Base(f), perm)
		}
	}
	if info, err := os.Stat(existing); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("an existing file's mode changed: %v %v", info.Mode(), err)
	}
}

// One address may hold -max-conns-per-client connections; the next gets a
// 429 too_many_connections and is closed. This machine's own address is
// not counted (the load runner opens hundreds).
func TestConnectionsPerAddress(t *testing.T) {
	nodes := testsupport.Redis(t, 3)
	app := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t), "-max-conns-per-client", "2")
	addr := strings.TrimPrefix(app.url, "http://")
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial from %s: %v", from, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	healthz := func(c net.Conn) string {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: shop\r\n\r\n"); err != nil {
			return err.Error()
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(line)
	}
	room := []net.Conn{dial("127.0.0.2"), dial("127.0.0.2")}
	for i, c := range room {
		if got := healthz(c); got != "HTTP/1.1 200 OK" {
			t.Fatalf("connection %d from the room: %q", i+1, got)
		}
	}
	third := dial("127.0.0.2")
	_ = third.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(third) // the refusal comes unasked, then the close
	if err != nil {
		t.Fatalf("the third connection: %v (read %q)", err, b)
	}
	head, body, _ := strings.Cut(string(b), "\r\n\r\n")
	var e struct{ Error, Message string }
	if !strings.HasPrefix(head, "HTTP/1.1 429 ") || json.Unmarshal([]byte(body), &e) != nil || e.Error != "too_many_connections" || e.Message == "" {
		t.Errorf("the third connection from one address got %q", b)
	}
	// The control: this machine holds more than the cap, all served.
	for i := range 4 {
		if got := healthz(dial("127.0.0.1")); got != "HTTP/1.1 200 OK" {
			t.Errorf("connection %d from 127.0.0.1: %q", i+1, got)
		}
	}
	m := app.mustCall("GET", "/metrics", "", 200)
	if !strings.Contains(string(m.body), `flashsale_limit_refusals_total{limit="connections_per_client"} 1`) {
		t.Errorf("the refused connection is not counted:\n%s", grep(string(m.body), "limit_refusals"))
	}
}

// In the default (workshop) mode a client from the room cannot name a
// broken rung, and -open-ladder lets it; the same request from this
// machine is served either way.
func TestWorkshopModeKeepsTheLadderFromTheRoom(t *testing.T) {
	nodes := testsupport.Redis(t, 3)
	order := `{"sku":"tee","qty":1,"user":"ann"}`
	for _, c := range []struct {
		name   string
		args   []string
		status int
	}{
		{"default", nil, 400},
		{"-open-ladder", []string{"-open-ladder"}, 201},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := start(t, nil, append([]string{"-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t), "-namespace", testsupport.Namespace(),
				"-trusted-proxies", "127.0.0.1"}, c.args...)...)
			app.reset("")
			a := app.call("POST", "/api/orders", order, "X-Lock-Variant", "none", "X-Forwarded-For", "192.0.2.7")
			if a.status != c.status {
				t.Errorf("the room names none: %d %s, want %d", a.status, a.body, c.status)
			}
			app.mustCall("POST", "/api/orders", order, 201, "X-Lock-Variant", "none")
		})
	}
}
