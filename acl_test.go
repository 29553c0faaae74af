package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/curriculum"
	"flashsale/internal/localredis"
	"flashsale/internal/redisacl"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// TestLadderAsAppUser runs every rung of the ladder, orders and seat grabs,
// on nodes that run the shipped ACL, with the app connected as its
// restricted user: two instances (one with the watchdog) so the live
// updates cross between them and waiters wake on keyspace events, a live
// stream open all along, the audits, and a node that restarts empty (the
// lock's re-seed and sit-out). Afterwards no node's ACL LOG holds an entry:
// nothing the app sent was refused.
func TestLadderAsAppUser(t *testing.T) {
	nodes := testsupport.Redis(t, 5, localredis.Options{ACL: true})
	if !nodes.ACL() {
		t.Fatal("nodes started without the ACL")
	}
	for _, u := range nodes.URLs() {
		if !strings.HasPrefix(u, "redis://flashsale:") {
			t.Fatalf("app URL %s does not name the app's user", u)
		}
	}
	args := []string{"-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t), "-lock-wait", "10s"}
	a := start(t, nil, args...)
	b := start(t, nil, append(args, "-watchdog")...)
	stream := openStream(t, a)

	for _, v := range curriculum.Names() {
		t.Run(v, func(t *testing.T) {
			a.reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":100,"stock":1000}],"seats":4}`)
			var answers tally
			var wg sync.WaitGroup
			for i := range 16 {
				app := []*instance{a, b}[i%2]
				wg.Go(func() {
					answers.add(app.call("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":"u%d"}`, i), "X-Lock-Variant", v))
				})
				wg.Go(func() {
					answers.add(app.call("POST", fmt.Sprintf("/api/events/gala/seats/A%d", i%4+1), fmt.Sprintf(`{"user":"u%d"}`, i), "X-Lock-Variant", v))
				})
			}
			wg.Wait()
			if answers.failures() > 0 || answers.get("201 ") == 0 {
				t.Fatalf("answers %v\n%s", &answers, a.stderr)
			}
			a.audit()
			a.mustCall("GET", "/api/audit", "", 200)
		})
	}
	stream.saw(t, `"type":"stock"`)

	// A node that comes back empty is met again: new incarnation, re-seed.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := nodes.Nodes[1].Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{lock.Redlock, lock.RedlockFence} {
		a.reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":100,"stock":10}],"seats":0}`)
		for i, app := range []*instance{a, b} {
			app.mustCall("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":"r%d"}`, i), 201, "X-Lock-Variant", v)
		}
	}
	a.mustCall("GET", "/readyz", "", 200)

	for i, u := range nodes.AdminURLs() {
		if refused := aclLog(ctx, t, u); len(refused) > 0 {
			t.Errorf("node %d refused the app's user:\n%s", i, strings.Join(refused, "\n"))
		}
	}
}

// aclLog is the node's ACL LOG, one line an entry, read as the admin.
func aclLog(ctx context.Context, t *testing.T, adminURL string) []string {
	t.Helper()
	o, err := redis.ParseURL(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	entries, err := rdb.ACLLog(ctx, 1000).Result()
	if err != nil {
		t.Fatalf("ACL LOG: %v", err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s %s %q by %s (%d times)", e.Reason, e.Context, e.Object, e.Username, e.Count))
	}
	return out
}

// liveStream is an open /api/stream: its data lines, as they come.
type liveStream struct{ events chan string }

func openStream(t *testing.T, in *instance) *liveStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", in.url+"/api/stream", nil)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &liveStream{events: make(chan string, 4096)}
	go func() {
		defer res.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				select {
				case s.events <- d:
				default: // the test reads only the first few
				}
			}
		}
	}()
	return s
}

// saw waits for an event holding want.
func (s *liveStream) saw(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				t.Fatalf("stream ended before an event with %s", want)
			}
			if strings.Contains(e, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no event with %s on the stream", want)
		}
	}
}

// TestEmbeddedDefaultAsAppUser: `go run .` with redis-server installed
// starts its nodes with the ACL and connects as the app's user: every
// connection the node holds, other than the admin's own, is the app
// user's, an order sells, and nothing was refused. The admin's password is
// read from the ACL file in the node's directory, under the TMPDIR this
// test sets.
func TestEmbeddedDefaultAsAppUser(t *testing.T) {
	testsupport.RequireRedis(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	app := start(t, map[string]string{"FLASHSALE_DB": filepath.Join(tmp, "sale.db")}, "-local-nodes", "3")
	app.mustCall("GET", "/readyz", "", 200)
	app.mustCall("POST", "/api/orders", `{"sku":"tee","qty":1,"user":"ann"}`, 201, "X-Lock-Variant", lock.Redlock)
	if !strings.Contains(app.stderr.String(), "the app connects as Redis user "+redisacl.AppUser) {
		t.Errorf("the log does not say the app connects as %s:\n%s", redisacl.AppUser, app.stderr)
	}

	files, err := filepath.Glob(filepath.Join(tmp, "localredis-*", "node-*", "users.acl"))
	if err != nil || len(files) != 3 {
		t.Fatalf("ACL files of the local nodes: %v %v", files, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range files {
		admin := adminClient(t, f)
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		apps := 0
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			switch user := field(line, "user"); user {
			case redisacl.AppUser:
				apps++
			case redisacl.AdminUser:
				if field(line, "cmd") != "client|list" {
					t.Errorf("%s: a connection as %s other than this test's: %s", f, user, line)
				}
			default:
				t.Errorf("%s: a connection as %q: %s", f, user, line)
			}
		}
		if apps == 0 {
			t.Errorf("%s: no connection as %s:\n%s", f, redisacl.AppUser, list)
		}
		if log, err := admin.ACLLog(ctx, 100).Result(); err != nil || len(log) > 0 {
			t.Errorf("%s: ACL LOG %v %v, want empty", f, log, err)
		}
	}
}

// adminClient connects to the node whose ACL file is aclFile, as the admin
// user that file names.
func adminClient(t *testing.T, aclFile string) *redis.Client {
	t.Helper()
	b, err := os.ReadFile(aclFile)
	if err != nil {
		t.Fatal(err)
	}
	var pw string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "user "+redisacl.AdminUser+" on >"); ok {
			pw, _, _ = strings.Cut(rest, " ")
		}
	}
	conf, err := os.ReadFile(filepath.Join(filepath.Dir(aclFile), "redis.log"))
	if err != nil || pw == "" {
		t.Fatalf("%s: admin password %q, log %v", aclFile, pw, err)
	}
	m := regexp.MustCompile(`port=(\d+)`).FindAllSubmatch(conf, -1)
	if m == nil {
		t.Fatalf("no port in %s's log", aclFile)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + string(m[len(m)-1][1]), Username: redisacl.AdminUser, Password: pw, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// field is one field of a CLIENT LIST line ("id=3 addr=… user=…").
func field(line, name string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}
