package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/curriculum"
	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

func TestMain(m *testing.M) { os.Exit(testsupport.Main(m)) }

const adminToken = "main-test-admin-token"

// instance is one storefront started by run, in this process, on :0.
type instance struct {
	t      *testing.T
	url    string
	stop   context.CancelFunc
	done   chan error
	stderr *testsupport.SyncBuffer
	stdout *testsupport.SyncBuffer // what it printed up to "listening on"
}

// start runs the storefront with args (after -addr 127.0.0.1:0 and the admin
// token) and waits for the "listening on" line. It is stopped when the test
// ends, if the test has not stopped it.
func start(t *testing.T, env map[string]string, args ...string) *instance {
	t.Helper()
	return startArgv(t, env, append([]string{"flashsale", "-addr", "127.0.0.1:0", "-admin-token", adminToken, "-log-level", "info"}, args...))
}

// startArgv runs the storefront with exactly argv; the instance's stdout
// keeps what it printed up to "listening on".
func startArgv(t *testing.T, env map[string]string, argv []string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	in := &instance{t: t, stop: cancel, done: make(chan error, 1), stderr: &testsupport.SyncBuffer{}, stdout: &testsupport.SyncBuffer{}}
	var stderr io.Writer = in.stderr
	if os.Getenv("FLASHSALE_TEST_LOG") != "" {
		stderr = io.MultiWriter(in.stderr, os.Stderr)
	}
	getenv := func(k string) string { return env[k] }
	go func() {
		err := run(ctx, argv, getenv, pw, stderr)
		pw.Close()
		in.done <- err
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(in.stdout, sc.Text())
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				found <- u
			}
		}
	}()
	select {
	case in.url = <-found:
	case err := <-in.done:
		t.Fatalf("run returned before listening: %v\n%s", err, in.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("run did not listen within 60s\n%s", in.stderr)
	}
	t.Cleanup(func() { in.shutdown() })
	return in
}

// shutdown cancels run's context and waits for it to return.
func (in *instance) shutdown() error {
	in.stop()
	select {
	case err, ok := <-in.done:
		if ok {
			close(in.done)
		}
		return err
	case <-time.After(60 * time.Second):
		in.t.Errorf("run did not return within 60s of cancellation")
		return errors.New("timeout")
	}
}

type answer struct {
	status int
	code   string
	header http.Header
	body   []byte
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 400}, Timeout: 60 * time.Second}

func (in *instance) call(method, path, body string, hdr ...string) answer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, in.url+path, rd)
	if err != nil {
		in.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := client.Do(req)
	if err != nil {
		return answer{status: -1, code: "transport", body: []byte(err.Error())}
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var e struct{ Error string }
	_ = json.Unmarshal(data, &e)
	return answer{status: res.StatusCode, code: e.Error, header: res.Header, body: data}
}

func (in *instance) mustCall(method, path, body string, status int, hdr ...string) answer {
	in.t.Helper()
	a := in.call(method, path, body, hdr...)
	if a.status != status {
		in.t.Fatalf("%s %s: %d %s, want %d", method, path, a.status, a.body, status)
	}
	return a
}

var admin = []string{"Authorization", "Bearer " + adminToken}

func (in *instance) reset(body string) {
	in.t.Helper()
	in.mustCall("POST", "/api/admin/reset", body, 200, admin...)
}

func (in *instance) setWork(ms int) {
	in.t.Helper()
	in.mustCall("PUT", "/api/admin/faults", fmt.Sprintf(`{"seed":1,"work_ms":%d,"faults":[]}`, ms), 200, admin...)
}

// audit is a fresh audit, from the admin route (the public one may be up
// to a second old).
func (in *instance) audit() inventory.Audit {
	in.t.Helper()
	a := in.mustCall("GET", "/api/admin/audit", "", 200, admin...)
	var au inventory.Audit
	if err := json.Unmarshal(a.body, &au); err != nil {
		in.t.Fatal(err)
	}
	return au
}

// tally counts answers by "status code".
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(a answer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[fmt.Sprintf("%d %s", a.status, a.code)]++
}

func (t *tally) get(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[key]
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprint(t.n)
}

// failures counts server errors other than 503, and requests that got no
// answer at all.
func (t *tally) failures() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, v := range t.n {
		if (strings.HasPrefix(k, "5") && !strings.HasPrefix(k, "503 ")) || strings.HasPrefix(k, "-1 ") {
			n += v
		}
	}
	return n
}

// cluster starts three instances sharing one database and five Redis nodes.
func cluster3(t *testing.T, dsn string, nodes *localredis.Cluster, extra ...string) []*instance {
	t.Helper()
	args := append([]string{"-redis", strings.Join(nodes.URLs(), ","), "-db", dsn}, extra...)
	var apps []*instance
	for range 3 {
		apps = append(apps, start(t, nil, args...))
	}
	return apps
}

func TestThreeInstancesOneSale(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 5)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			apps := cluster3(t, d.DSN(t), nodes, "-lock-wait", "10s", "-lock-ttl", "2s")
			for _, c := range []struct {
				variant string
				workMS  int
			}{{lock.Lua, 0}, {lock.Redlock, 0}, {lock.RedlockFence, 0}, {ladder.None, 10}} {
				t.Run(c.variant, func(t *testing.T) {
					apps[0].reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":100,"stock":50}],"seats":0}`)
					for _, a := range apps {
						a.setWork(c.workMS)
					}
					var answers tally
					var wg sync.WaitGroup
					for i := range 300 {
						wg.Go(func() {
							answers.add(apps[i%3].call("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":"u%d"}`, i), "X-Lock-Variant", c.variant))
						})
					}
					wg.Wait()
					au := apps[1].audit()
					t.Logf("%s: answers %v; audit sold=%d orders=%d oversold=%d lost=%d ok=%v",
						c.variant, &answers, au.SoldUnits, au.Orders, au.OversoldUnits, au.LostUpdates, au.OK)
					if answers.failures() > 0 {
						t.Errorf("server errors: %v", &answers)
					}
					if c.variant == ladder.None {
						if au.OK || au.OversoldUnits == 0 {
							t.Fatalf("no lock with %dms of work must oversell: %+v", c.workMS, au)
						}
						return
					}
					if !au.OK || au.SoldUnits != 50 || au.Orders != 50 || answers.get("201 ") != 50 {
						t.Fatalf("want exactly 50 sold and 50 201s: answers %v, audit %+v", &answers, au)
					}
				})
			}
		})
	}
}

func TestSeatRaceAcrossInstances(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 5)
	apps := cluster3(t, testsupport.SQLite(t), nodes, "-lock-wait", "10s")
	for _, v := range []string{lock.Redlock, lock.LuaFence} {
		t.Run(v, func(t *testing.T) {
			apps[0].reset(`{"products":[],"seats":10}`)
			for _, a := range apps {
				a.setWork(2)
			}
			var answers tally
			var wg sync.WaitGroup
			for i := range 100 {
				wg.Go(func() {
					answers.add(apps[i%3].call("POST", fmt.Sprintf("/api/events/gala/seats/A%d", i%10+1),
						fmt.Sprintf(`{"user":"u%d"}`, i), "X-Lock-Variant", v))
				})
			}
			wg.Wait()
			au := apps[2].audit()
			if !au.OK || au.Bookings != 10 || au.DoubleBookedSeats != 0 || answers.get("201 ") != 10 || answers.get("409 seat_taken") != 90 {
				t.Fatalf("answers %v, audit %+v", &answers, au)
			}
		})
	}
}

func TestQuorumLostMidSale(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 5)
	apps := cluster3(t, testsupport.SQLite(t), nodes, "-lock-wait", "400ms", "-lock-ttl", "1s")
	apps[0].reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":100,"stock":100000}],"seats":0}`)
	for _, a := range apps {
		a.setWork(2)
	}
	var (
		answers      tally
		soldAfterOut atomic.Int64 // 201s once the nodes are back
		phase        atomic.Int32 // 0 before, 1 nodes down, 2 nodes back
		downAnswers  tally
	)
	ctx, stopShoppers := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				a := apps[w%3].call("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":"w%d-%d"}`, w, i))
				answers.add(a)
				switch phase.Load() {
				case 1:
					downAnswers.add(a)
				case 2:
					if a.status == 201 {
						soldAfterOut.Add(1)
					}
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	for _, n := range nodes.Nodes[:3] {
		if err := n.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // in-flight holders finish
	phase.Store(1)
	time.Sleep(1500 * time.Millisecond)
	for _, n := range nodes.Nodes[:3] {
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	phase.Store(2)
	deadline := time.Now().Add(20 * time.Second)
	for soldAfterOut.Load() < 10 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stopShoppers()
	wg.Wait()
	t.Logf("all answers %v; while the quorum was lost %v; sold after the nodes returned %d", &answers, &downAnswers, soldAfterOut.Load())
	if answers.failures() > 0 {
		t.Errorf("server errors: %v", &answers)
	}
	if downAnswers.get("503 lock_unavailable") == 0 || downAnswers.get("201 ") > 0 {
		t.Errorf("while the quorum was lost: %v (want 503 lock_unavailable, no sale)", &downAnswers)
	}
	if soldAfterOut.Load() < 10 {
		t.Errorf("sales did not resume after the nodes returned (%d sold)", soldAfterOut.Load())
	}
	au := apps[0].audit()
	if !au.OK || au.SoldUnits != int64(answers.get("201 ")) {
		t.Fatalf("audit %+v, 201s %d", au, answers.get("201 "))
	}
}

func TestGracefulShutdownKeepsEvery201(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 3)
	dsn := testsupport.SQLite(t)
	app := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", dsn, "-lock-wait", "5s")
	var products []string
	for i := range 20 {
		products = append(products, fmt.Sprintf(`{"sku":"p%d","name":"P","price_cents":1,"stock":5}`, i))
	}
	app.reset(`{"products":[` + strings.Join(products, ",") + `],"seats":0}`)
	app.setWork(400)

	results := make(chan answer, 40)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			results <- app.call("POST", "/api/orders", fmt.Sprintf(`{"sku":"p%d","qty":1,"user":"u%d"}`, i%20, i))
		})
	}
	time.Sleep(150 * time.Millisecond) // every request is in its critical section now
	if err := app.shutdown(); err != nil {
		t.Fatalf("run: %v", err)
	}
	wg.Wait()
	close(results)
	var ids []uint64
	var answers tally
	for a := range results {
		answers.add(a)
		if a.status == 201 {
			var o inventory.Order
			if err := json.Unmarshal(a.body, &o); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, o.ID)
		}
	}
	t.Logf("answers during shutdown: %v", &answers)
	if len(ids) == 0 {
		t.Fatalf("no request finished during the shutdown: %v", &answers)
	}
	if answers.failures() > answers.get("-1 transport") {
		t.Errorf("server errors: %v", &answers)
	}
	db, err := inventory.Open(context.Background(), dsn, testsupport.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer inventory.Close(db)
	var found int64
	if err := db.Model(&inventory.Order{}).Where("id IN ?", ids).Count(&found).Error; err != nil {
		t.Fatal(err)
	}
	var all int64
	db.Model(&inventory.Order{}).Count(&all)
	if found != int64(len(ids)) || all != int64(len(ids)) {
		t.Fatalf("%d orders answered 201, %d of them in the database, %d orders in all", len(ids), found, all)
	}
	// Every lease was released on the way out: no lock key is left.
	for _, u := range nodes.URLs() {
		o, _ := redis.ParseURL(u)
		rdb := redis.NewClient(o)
		keys, err := rdb.Keys(context.Background(), "flashsale:lock:*").Result()
		rdb.Close()
		if err != nil || len(keys) > 0 {
			t.Fatalf("node %s: lock keys left %v (%v)", u, keys, err)
		}
	}
}

// On shutdown with -drain, /readyz answers 503 draining at once while the
// listener still accepts and sells: a load balancer that checks /readyz
// takes the instance out before it stops accepting.
func TestDrainBeforeShutdown(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 3)
	app := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t), "-drain", "5s")
	app.reset(`{"products":[{"sku":"d","name":"D","price_cents":1,"stock":5}],"seats":0}`)
	app.mustCall("GET", "/readyz", "", 200)

	app.stop() // SIGTERM, as run sees it; shutdown below waits for the end
	deadline := time.Now().Add(4 * time.Second)
	for {
		r := app.call("GET", "/readyz", "")
		if r.status == 503 && r.code == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz answered %d %s, want 503 draining while the instance drains", r.status, r.code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Still serving: a new connection is accepted and sells.
	if r := app.call("POST", "/api/orders", `{"sku":"d","qty":1,"user":"late"}`); r.status != 201 {
		t.Errorf("an order while draining answered %d %s, want 201", r.status, r.code)
	}
	if err := app.shutdown(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(app.stderr.String(), "draining") {
		t.Errorf("the log does not say the instance drained:\n%s", app.stderr)
	}
}

func TestStreamAcrossInstances(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 3)
	args := []string{"-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t)}
	a, b := start(t, nil, args...), start(t, nil, args...)
	a.reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":1,"stock":100}],"seats":5}`)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.url+"/api/stream", nil)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- d
			}
		}
	}()
	// Keep selling on B until A's stream shows it (A subscribes a moment
	// after it starts).
	for i := 0; ; i++ {
		b.mustCall("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":"u%d"}`, i), 201)
		timeout := time.After(500 * time.Millisecond)
	drain:
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatal("stream closed")
				}
				if strings.Contains(e, `"type":"stock"`) && strings.Contains(e, `"sku":"hot"`) {
					goto seats
				}
			case <-timeout:
				break drain
			}
		}
		if ctx.Err() != nil || i > 20 {
			t.Fatal("a sale on instance B never reached instance A's stream")
		}
	}
seats:
	b.mustCall("POST", "/api/events/gala/seats/A4", `{"user":"zoe"}`, 201)
	for e := range events {
		if strings.Contains(e, `"type":"seat"`) && strings.Contains(e, `"seat":"A4"`) {
			if strings.Contains(e, "zoe") {
				t.Errorf("the public stream names the booker: %s", e)
			}
			// A shutting down ends the stream instead of hanging on it.
			go a.shutdown()
			for range events {
			}
			return
		}
	}
	t.Fatal("a seat grab on instance B never reached instance A's stream")
}

func TestEmbeddedDefault(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	if !localredis.Available() && testsupport.CI() {
		t.Fatal("CI=true: redis-server is not on PATH")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, stderr := &testsupport.SyncBuffer{}, &testsupport.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"flashsale", "-addr", "127.0.0.1:0", "-local-nodes", "3"},
			func(k string) string { return map[string]string{"FLASHSALE_DB": dir + "/sale.db"}[k] }, out, stderr)
	}()
	listening := regexp.MustCompile(`listening on (http://\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	var url string
	for url == "" && time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if url == "" {
		t.Fatalf("not listening; stdout %q stderr %s", out, stderr)
	}
	tok := regexp.MustCompile(`admin token \(generated[^)]*\): ([0-9a-f]{32})`).FindStringSubmatch(out.String())
	if tok == nil {
		t.Fatalf("no generated admin token printed: %q", out)
	}
	app := &instance{t: t, url: url}
	app.mustCall("GET", "/readyz", "", 200)
	app.mustCall("POST", "/api/orders", `{"sku":"tee","qty":1,"user":"ann"}`, 201)
	app.mustCall("POST", "/api/admin/reset", "", 401)
	app.mustCall("POST", "/api/admin/reset", "", 200, "Authorization", "Bearer "+tok[1])

	logs := stderr.String()
	m := regexp.MustCompile(`started local Redis nodes" kind="([^"]+)" addrs=(\S+)`).FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no log line saying which local nodes started and where:\n%s", logs)
	}
	if localredis.Available() && !strings.HasPrefix(m[1], "redis-server") {
		t.Errorf("redis-server is installed, yet the nodes are %q", m[1])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, addr := range strings.Split(m[2], ",") {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("local node %s still answers after run returned", addr)
		}
	}
}

func TestConfig(t *testing.T) {
	env := map[string]string{
		"FLASHSALE_ADDR": "127.0.0.1:9999", "FLASHSALE_LOCK": "lua+fence", "FLASHSALE_LOCK_TTL": "3s",
		"FLASHSALE_LOCK_WAIT": "250ms", "FLASHSALE_PRODUCTION": "true", "FLASHSALE_LOCAL_NODES": "3",
		"FLASHSALE_REDIS": "redis://a:1,redis://b:2", "FLASHSALE_DB": "postgres://x/y", "FLASHSALE_ADMIN_TOKEN": "tok-of-the-environment",
		"FLASHSALE_BATCH": "true", "FLASHSALE_BATCH_MAX": "16",
	}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig([]string{"flashsale"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.batch || c.batchMax != 16 {
		t.Fatalf("batch from the environment: %v, max %d", c.batch, c.batchMax)
	}
	if c, err := parseConfig([]string{"flashsale", "-batch=false", "-batch-max", "0"}, getenv, io.Discard); err == nil || c.batch {
		t.Fatalf("-batch-max 0: %v (batch %v), want an error", err, c.batch)
	}
	if c.addr != "127.0.0.1:9999" || c.lock != "lua+fence" || c.lockTTL != 3*time.Second || c.lockWait != 250*time.Millisecond ||
		!c.production || c.localNodes != 3 || c.redis != "redis://a:1,redis://b:2" || c.db != "postgres://x/y" || c.adminToken != "tok-of-the-environment" {
		t.Fatalf("env fallbacks: %+v", c)
	}
	c, err = parseConfig([]string{"flashsale", "-lock", "lua", "-addr", ":1", "-production=false"}, getenv, io.Discard)
	if err != nil || c.lock != "lua" || c.addr != ":1" || c.production {
		t.Fatalf("flags over env: %+v %v", c, err)
	}
	c, err = parseConfig([]string{"flashsale"}, func(string) string { return "" }, io.Discard)
	if err != nil || c.addr != "127.0.0.1:8080" || c.lock != "redlock" || c.lockTTL != 2*time.Second ||
		c.lockWait != time.Second || c.db != "flashsale.db" || c.redis != "" || c.localNodes != 5 || c.adminToken != "" || c.production {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for _, bad := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"flashsale", "-lock", "mutex"}, nil},
		{[]string{"flashsale", "-lock-ttl", "0s"}, nil},
		{[]string{"flashsale", "-nope"}, nil},
		{[]string{"flashsale", "extra"}, nil},
		{[]string{"flashsale"}, map[string]string{"FLASHSALE_LOCK_WAIT": "soon"}},
		{[]string{"flashsale"}, map[string]string{"FLASHSALE_PRODUCTION": "maybe"}},
	} {
		if _, err := parseConfig(bad.args, func(k string) string { return bad.env[k] }, io.Discard); err == nil {
			t.Errorf("%v %v: no error", bad.args, bad.env)
		}
	}
	if _, err := parseConfig([]string{"flashsale", "-h"}, getenv, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	if err := run(context.Background(), []string{"flashsale", "-redis", "mysql://nope"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Error("a bad -redis URL must fail")
	}
}

// The limits of a public storefront: each from its flag or variable, and
// the defaults of each mode.
func TestConfigLimits(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	none := func(string) string { return "" }
	c, err := parseConfig([]string{"flashsale"}, none, io.Discard)
	if err != nil || !slices.Equal(c.variants, curriculum.Names()) || c.orderRate != roomOrderRate || !c.orderRateRoomOnly || c.orderBurst != 10 ||
		c.openLadder || c.maxConnsPerClient != defaultMaxConnsPerClient ||
		c.maxStreams != 1000 || c.maxStreamsPerClient != 8 || c.bodyTimeout != 10*time.Second || c.auditInterval != time.Second || c.trustedProxies != nil {
		t.Fatalf("workshop defaults: %+v %v", c, err)
	}
	c, err = parseConfig([]string{"flashsale", "-production"}, none, io.Discard)
	if c, err := parseConfig([]string{"flashsale", "-production", "-open-ladder"}, none, io.Discard); err != nil || c.openLadder {
		t.Fatalf("-production -open-ladder: ladder open %v, %v; want it closed, as -production allows no broken variant", c.openLadder, err)
	}
	if err != nil || !slices.Equal(c.variants, []string{"redlock"}) || c.orderRate != productionOrderRate || c.orderRateRoomOnly {
		t.Fatalf("production defaults: %+v %v", c, err)
	}
	c, err = parseConfig([]string{"flashsale", "-production", "-order-rate", "0", "-variants", "redlock,lua+fence"}, none, io.Discard)
	if err != nil || !slices.Equal(c.variants, []string{"redlock", "lua+fence"}) || c.orderRate != 0 {
		t.Fatalf("production with -order-rate 0 and -variants: %+v %v", c, err)
	}
	env := map[string]string{
		"FLASHSALE_VARIANTS": "lua, none", "FLASHSALE_LOCK": "lua", "FLASHSALE_MAX_STREAMS": "7", "FLASHSALE_MAX_STREAMS_PER_CLIENT": "2",
		"FLASHSALE_ORDER_RATE": "0.5", "FLASHSALE_ORDER_BURST": "3", "FLASHSALE_BODY_TIMEOUT": "2s",
		"FLASHSALE_AUDIT_INTERVAL": "5s", "FLASHSALE_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1",
	}
	c, err = parseConfig([]string{"flashsale"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || !slices.Equal(c.variants, []string{"lua", "none"}) || c.maxStreams != 7 || c.maxStreamsPerClient != 2 ||
		c.orderRate != 0.5 || c.orderRateRoomOnly || c.orderBurst != 3 || c.bodyTimeout != 2*time.Second || c.auditInterval != 5*time.Second ||
		!slices.Equal(c.trustedProxies, []string{"10.0.0.0/8", "127.0.0.1"}) {
		t.Fatalf("env fallbacks: %+v %v", c, err)
	}
	for _, bad := range [][]string{
		{"-production", "-lock", "none"},
		{"-production", "-lock", "lua", "-variants", "lua,setnx-expire"},
		{"-variants", "lua"},           // -lock redlock not allowed
		{"-variants", "redlock,mutex"}, // no such variant
		{"-order-rate", "-1"},          // negative
		{"-order-rate", "fast"},        // not a number
		{"-max-streams", "0"}, {"-order-burst", "0"}, {"-body-timeout", "0s"}, {"-audit-interval", "0s"},
		{"-max-conns-per-client", "0"},
	} {
		if _, err := parseConfig(append([]string{"flashsale"}, bad...), none, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, err := parseConfig([]string{"flashsale"}, func(k string) string { return map[string]string{"FLASHSALE_ORDER_RATE": "fast"}[k] }, io.Discard); err == nil {
		t.Error("FLASHSALE_ORDER_RATE=fast: no error")
	}
	// A -production instance refuses a broken variant, with the allowed list.
	nodes := testsupport.Redis(t, 3)
	app := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t), "-production")
	app.reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":1,"stock":10}],"seats":2}`)
	for _, v := range []string{"none", "setnx-expire", "lua"} {
		a := app.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, "X-Lock-Variant", v)
		if a.status != 400 || a.code != "variant_not_allowed" || !strings.Contains(string(a.body), "allows redlock") {
			t.Errorf("-production, X-Lock-Variant %s: %d %s", v, a.status, a.body)
		}
	}
	app.mustCall("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, 201)
}

// Shutdown ends a workshop run's stream at once: it does not hold the
// graceful stop for its timeout.
func TestShutdownEndsWorkshopStream(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 3)
	app := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t), "-shutdown-timeout", "30s")
	var run struct{ ID string }
	a := app.mustCall("POST", "/api/admin/workshop/runs", `{"variant":"lua","scenario":"clean","rate":5,"duration_s":60}`, 202, admin...)
	if err := json.Unmarshal(a.body, &run); err != nil || run.ID == "" {
		t.Fatalf("run: %s %v", a.body, err)
	}
	req, _ := http.NewRequest("GET", app.url+"/api/admin/workshop/runs/"+run.ID+"/stream", nil)
	req.Header.Set(admin[0], admin[1])
	res, err := client.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("stream: %v %v", res, err)
	}
	defer res.Body.Close()
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, res.Body); close(ended) }()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := app.shutdown(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("shutdown took %v with a workshop stream open (timeout 30s)", d)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("the workshop stream is still open after shutdown")
	}
}

// Restart awareness over HTTP, with two instances whose -lock-ttl differ: a
// node restarted without its data sits out the largest TTL any instance
// uses. While the 5 s instance works under its lease, three of the five
// nodes restart empty; the 500 ms instance must not get the lock (it would
// sell the stock the first one read: a lost update) before that lease ends.
func TestRestartSitOutIsTheLargestTTLAcrossInstances(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 5)
	args := []string{"-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t), "-lock-wait", "10s"}
	long := start(t, nil, append(args, "-lock-ttl", "5s")...)
	short := start(t, nil, append(args, "-lock-ttl", "500ms")...)
	ctx := context.Background()
	if err := nodes.Aged(ctx, lock.MinUptime(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, app := range []*instance{long, short} {
		for app.call("GET", "/readyz", "").status != 200 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	long.reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":100,"stock":10}],"seats":0}`)
	long.setWork(4000)
	short.setWork(0)

	first := make(chan answer, 1)
	go func() {
		first <- long.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"long"}`, "X-Lock-Variant", lock.Redlock)
	}()
	raw := redis.NewClient(&redis.Options{Addr: nodes.Nodes[4].Addr()})
	defer raw.Close()
	for raw.Exists(ctx, "flashsale:lock:sku:hot").Val() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 3 {
		if err := nodes.Nodes[i].Restart(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	var answers tally
	for i := 0; ; i++ {
		select {
		case a := <-first:
			if a.status != 201 {
				t.Fatalf("the long instance's order: %d %s", a.status, a.body)
			}
			if au := long.audit(); !au.OK || au.LostUpdates != 0 {
				t.Fatalf("the short instance sold under the long one's lease: answers %v, audit %+v", &answers, au)
			}
			t.Logf("the short instance's orders during the long lease: %v", &answers)
			return
		default:
		}
		answers.add(short.call("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":"s%d"}`, i), "X-Lock-Variant", lock.Redlock))
		time.Sleep(20 * time.Millisecond) // a shopper's pace, not a wait for anything
	}
}
