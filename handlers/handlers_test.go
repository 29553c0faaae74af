package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"flashsale/handlers"
	"flashsale/internal/broker"
	"flashsale/internal/fault"
	"flashsale/internal/localredis"
	"flashsale/internal/locktap"
	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

const token = "test-admin-token"

// app is one storefront served by httptest over real Redis nodes and a real
// SQLite file.
type app struct {
	t       *testing.T
	url     string
	svc     *inventory.Service
	lockers *lock.Client
	nodes   *localredis.Cluster
	srv     *handlers.Server
}

type appOpts struct {
	nodes int
	ttl   time.Duration
	wait  time.Duration
	// db is the database's DSN; a fresh SQLite file when empty.
	db string
	// config, when set, changes the server's configuration before it is built.
	config func(*handlers.Config)
	// writeTimeout, when set, is the HTTP server's, as main sets one.
	writeTimeout time.Duration
}

func newApp(t *testing.T, o appOpts) *app {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 3
	}
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	if o.wait == 0 {
		o.wait = 2 * time.Second
	}
	nodes := testsupport.Redis(t, o.nodes)
	ns := testsupport.Namespace()
	log := testsupport.Logger()
	metrics := handlers.NewMetrics()
	faults := fault.NewPlan()
	opts := lock.Options{TTL: o.ttl, Namespace: ns, Logger: log, NodeTimeout: 50 * time.Millisecond}
	lockers, err := lock.New(testsupport.Options(t, nodes), inventory.With(ladder.With(locktap.Tapped(opts, locktap.Tap{Faults: faults, Observer: metrics.ObserveLock}))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lockers.Close() })
	ctx := context.Background()
	if o.db == "" {
		o.db = testsupport.SQLite(t)
	}
	db, err := inventory.Open(ctx, o.db, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inventory.Close(db) })
	rdbs := testsupport.Clients(t, nodes)
	live := broker.New(rdbs, ns, log, metrics.StreamDropped)
	svc, err := inventory.New(ctx, db, lockers, inventory.Config{
		Nodes: rdbs, Namespace: ns, LockWait: o.wait, Logger: log,
		Notify: func(c inventory.Change) { live.Publish(c) },
	})
	if err != nil {
		t.Fatal(err)
	}
	metrics.WatchInventory(svc)
	cfg := handlers.Config{
		Inventory: svc, Lockers: lockers, Faults: faults, LockTTL: o.ttl, Metrics: metrics, Broker: live,
		AdminToken: token, DefaultLock: lock.Redlock, Logger: log, Heartbeat: 100 * time.Millisecond,
	}
	if o.config != nil {
		o.config(&cfg)
	}
	srv, err := handlers.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { live.Run(bctx); close(done) }()
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.WriteTimeout = o.writeTimeout
	hs.Start()
	t.Cleanup(func() { hs.Close(); stop(); <-done })
	return &app{t: t, url: hs.URL, svc: svc, lockers: lockers, nodes: nodes, srv: srv}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// code is the error code of an error answer.
func (r response) code() string {
	var e struct{ Error, Message string }
	_ = json.Unmarshal(r.body, &e)
	return e.Error
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// call sends body (a string is sent as is, anything else as JSON) with the
// given header pairs; JSON bodies get Content-Type application/json unless
// a pair sets it.
func (a *app) call(method, path string, body any, hdr ...string) response {
	a.t.Helper()
	return a.callCtx(context.Background(), method, path, body, hdr...)
}

func (a *app) callCtx(ctx context.Context, method, path string, body any, hdr ...string) response {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = strings.NewReader(string(data))
	}
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{status: -1, body: []byte(err.Error())}
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: data}
}

var admin = []string{"Authorization", "Bearer " + token}

func (a *app) reset(stock int64, seats int) {
	a.t.Helper()
	r := a.call("POST", "/api/admin/reset", map[string]any{
		"products": []map[string]any{{"sku": "hot", "name": "Hot item", "price_cents": 250, "stock": stock}},
		"seats":    seats,
	}, admin...)
	if r.status != 200 {
		a.t.Fatalf("reset: %d %s", r.status, r.body)
	}
}

// audit is a fresh audit, from the admin route (the public one may be up
// to a second old).
func (a *app) audit() inventory.Audit {
	a.t.Helper()
	r := a.call("GET", "/api/admin/audit", nil, admin...)
	if r.status != 200 {
		a.t.Fatalf("audit: %d %s", r.status, r.body)
	}
	var au inventory.Audit
	r.decode(a.t, &au)
	return au
}

// want checks status and error code (none for a success) and that every
// answer is JSON.
func want(t *testing.T, name string, r response, status int, code string) {
	t.Helper()
	if r.status != status || r.code() != code {
		t.Errorf("%s: got %d %q (%s), want %d %q", name, r.status, r.code(), r.body, status, code)
		return
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: content type %q", name, ct)
	}
	if code != "" {
		var e struct{ Message string }
		_ = json.Unmarshal(r.body, &e)
		if e.Message == "" {
			t.Errorf("%s: error without a message: %s", name, r.body)
		}
	}
}

func TestOrderBadInput(t *testing.T) {
	a := newApp(t, appOpts{nodes: 1})
	a.reset(5, 3)
	ok := `{"sku":"hot","qty":1,"user":"ann"}`
	cases := []struct {
		name   string
		body   string
		hdr    []string
		status int
		code   string
	}{
		{"malformed json", `{"sku":"hot",`, nil, 400, "bad_json"},
		{"not an object", `[1,2]`, nil, 400, "bad_json"},
		{"trailing data", ok + `{}`, nil, 400, "bad_json"},
		{"empty body", ``, nil, 400, "bad_json"},
		{"unknown field", `{"sku":"hot","qty":1,"user":"ann","price":1}`, nil, 400, "unknown_field"},
		{"wrong content type", ok, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"no content type", ok, []string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"body too large", `{"sku":"hot","qty":1,"user":"` + strings.Repeat("a", 5000) + `"}`, nil, 413, "body_too_large"},
		{"missing user", `{"sku":"hot","qty":1}`, nil, 422, "invalid_user"},
		{"empty user", `{"sku":"hot","qty":1,"user":""}`, nil, 422, "invalid_user"},
		{"blank user", `{"sku":"hot","qty":1,"user":"   "}`, nil, 422, "invalid_user"},
		{"overlong user", `{"sku":"hot","qty":1,"user":"` + strings.Repeat("a", 65) + `"}`, nil, 422, "invalid_user"},
		{"control characters in user", `{"sku":"hot","qty":1,"user":"a\u0000b"}`, nil, 422, "invalid_user"},
		{"missing qty", `{"sku":"hot","user":"ann"}`, nil, 422, "invalid_qty"},
		{"zero qty", `{"sku":"hot","qty":0,"user":"ann"}`, nil, 422, "invalid_qty"},
		{"negative qty", `{"sku":"hot","qty":-3,"user":"ann"}`, nil, 422, "invalid_qty"},
		{"qty above the cap", `{"sku":"hot","qty":11,"user":"ann"}`, nil, 422, "invalid_qty"},
		{"qty not a number", `{"sku":"hot","qty":"two","user":"ann"}`, nil, 400, "bad_json"},
		{"fractional qty", `{"sku":"hot","qty":1.5,"user":"ann"}`, nil, 400, "bad_json"},
		{"unknown sku", `{"sku":"cold","qty":1,"user":"ann"}`, nil, 404, "unknown_sku"},
		{"unknown lock", ok, []string{"X-Lock-Variant", "mutex"}, 400, "unknown_lock"},
		{"bad idempotency key", ok, []string{"Idempotency-Key", "has space"}, 400, "invalid_idempotency_key"},
		{"overlong idempotency key", ok, []string{"Idempotency-Key", strings.Repeat("k", 129)}, 400, "invalid_idempotency_key"},
	}
	for _, c := range cases {
		want(t, c.name, a.call("POST", "/api/orders", c.body, c.hdr...), c.status, c.code)
	}
	if au := a.audit(); au.Orders != 0 || !au.OK {
		t.Fatalf("bad input wrote something: %+v", au)
	}
}

func TestSeatBadInput(t *testing.T) {
	a := newApp(t, appOpts{nodes: 1})
	a.reset(5, 3)
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     string
	}{
		{"unknown event map", "GET", "/api/events/opera/seats", "", nil, 404, "unknown_event"},
		{"unknown event", "POST", "/api/events/opera/seats/A1", `{"user":"ann"}`, nil, 404, "unknown_event"},
		{"unknown seat", "POST", "/api/events/gala/seats/Z99", `{"user":"ann"}`, nil, 404, "unknown_seat"},
		{"missing user", "POST", "/api/events/gala/seats/A1", `{}`, nil, 422, "invalid_user"},
		{"unknown field", "POST", "/api/events/gala/seats/A1", `{"user":"ann","seat":"A2"}`, nil, 400, "unknown_field"},
		{"malformed", "POST", "/api/events/gala/seats/A1", `{"user":`, nil, 400, "bad_json"},
		{"wrong content type", "POST", "/api/events/gala/seats/A1", `{"user":"ann"}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"too large", "POST", "/api/events/gala/seats/A1", `{"user":"` + strings.Repeat("b", 5000) + `"}`, nil, 413, "body_too_large"},
		{"unknown lock", "POST", "/api/events/gala/seats/A1", `{"user":"ann"}`, []string{"X-Lock-Variant", "lua+magic"}, 400, "unknown_lock"},
		{"unknown route", "GET", "/api/nope", "", nil, 404, "not_found"},
		{"wrong method", "DELETE", "/api/products", "", nil, 405, "method_not_allowed"},
		{"orders without user", "GET", "/api/orders", "", admin, 422, "invalid_user"},
		{"orders without the token", "GET", "/api/orders", "", nil, 401, "unauthorized"},
	}
	for _, c := range cases {
		var body any
		if c.body != "" {
			body = c.body
		}
		want(t, c.name, a.call(c.method, c.path, body, c.hdr...), c.status, c.code)
	}
	if au := a.audit(); au.Bookings != 0 {
		t.Fatalf("bad input booked something: %+v", au)
	}
}

func TestShopperRoutes(t *testing.T) {
	a := newApp(t, appOpts{})
	a.reset(3, 4)

	r := a.call("GET", "/api/products", nil)
	want(t, "products", r, 200, "")
	var ps []map[string]any
	r.decode(t, &ps)
	if len(ps) != 1 || ps[0]["sku"] != "hot" || ps[0]["stock"] != 3.0 || ps[0]["initial_stock"] != 3.0 || ps[0]["price_cents"] != 250.0 || ps[0]["name"] != "Hot item" {
		t.Fatalf("products %s", r.body)
	}

	r = a.call("POST", "/api/orders", `{"sku":"hot","qty":2,"user":"ann"}`, "X-Lock-Variant", "lua+fence")
	want(t, "order", r, 201, "")
	var o map[string]any
	r.decode(t, &o)
	if o["lock"] != "lua+fence" || o["fence"] == nil || o["qty"] != 2.0 || o["user"] != "ann" || o["sku"] != "hot" {
		t.Fatalf("order %s", r.body)
	}
	r = a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"bob"}`) // default variant
	want(t, "order with the default lock", r, 201, "")
	r.decode(t, &o)
	if o["lock"] != lock.Redlock || o["fence"] != nil {
		t.Fatalf("default-lock order %s", r.body)
	}
	r = a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"cat"}`)
	want(t, "sold out", r, 409, "sold_out")

	// A user's orders are the admin's to read; a shopper's page keeps its own.
	want(t, "orders of ann without the token", a.call("GET", "/api/orders?user=ann", nil), 401, "unauthorized")
	r = a.call("GET", "/api/orders?user=ann", nil, admin...)
	want(t, "orders of ann", r, 200, "")
	var os []map[string]any
	r.decode(t, &os)
	if len(os) != 1 {
		t.Fatalf("ann's orders %s", r.body)
	}

	r = a.call("POST", "/api/events/gala/seats/A2", `{"user":"ann"}`, "X-Lock-Variant", "redlock+fence")
	want(t, "grab", r, 201, "")
	var b map[string]any
	r.decode(t, &b)
	if b["event"] != "gala" || b["seat"] != "A2" || b["lock"] != "redlock+fence" || b["fence"] == nil {
		t.Fatalf("booking %s", r.body)
	}
	want(t, "seat taken", a.call("POST", "/api/events/gala/seats/A2", `{"user":"bob"}`), 409, "seat_taken")
	r = a.call("GET", "/api/events/gala/seats", nil)
	want(t, "seat map", r, 200, "")
	var m inventory.SeatMap
	r.decode(t, &m)
	if len(m.Seats) != 4 || !m.Seats[1].Taken || m.Seats[1].User != "" || m.Seats[0].Taken || strings.Contains(string(r.body), "ann") {
		t.Fatalf("the public seat map %s: want A2 taken, by nobody named", r.body)
	}
	r = a.call("GET", "/api/events/gala/seats", nil, admin...)
	r.decode(t, &m)
	if !m.Seats[1].Taken || m.Seats[1].User != "ann" {
		t.Fatalf("the admin's seat map %s: want A2 taken by ann", r.body)
	}

	au := a.audit()
	if !au.OK || au.SoldUnits != 3 || au.Orders != 2 || au.Bookings != 1 {
		t.Fatalf("audit %+v", au)
	}
	r = a.call("GET", "/api/audit", nil)
	var raw map[string]any
	r.decode(t, &raw)
	for _, k := range []string{"ok", "sold_units", "orders", "oversold_units", "lost_updates", "double_booked_seats", "stuck_locks"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("audit lacks %q: %s", k, r.body)
		}
	}

	want(t, "healthz", a.call("GET", "/healthz", nil), 200, "")
	want(t, "readyz", a.call("GET", "/readyz", nil), 200, "")
	want(t, "index", a.call("GET", "/api", nil), 200, "")
	if page := a.call("GET", "/", nil); page.status != 200 || !strings.Contains(string(page.body), "<html") {
		t.Errorf("GET / should serve the storefront page, got %d", page.status)
	}
}

func TestIdempotencyKeyOverHTTP(t *testing.T) {
	a := newApp(t, appOpts{})
	a.reset(50, 3)
	body := `{"sku":"hot","qty":2,"user":"ann"}`
	first := a.call("POST", "/api/orders", body, "Idempotency-Key", "abc-1")
	want(t, "first", first, 201, "")
	again := a.call("POST", "/api/orders", body, "Idempotency-Key", "abc-1")
	want(t, "replay", again, 201, "")
	// The replay is the same order; only the sale that made it says the
	// stock its transaction left.
	var made, replayed map[string]any
	first.decode(t, &made)
	again.decode(t, &replayed)
	left, said := made["stock_left"]
	delete(made, "stock_left")
	if _, carried := replayed["stock_left"]; carried || !said || left != float64(48) {
		t.Fatalf("stock_left: the sale's %v (want 48), the replay's %v (want none)", left, replayed["stock_left"])
	}
	if again.header.Get("Idempotent-Replay") != "true" || !reflect.DeepEqual(made, replayed) {
		t.Fatalf("replay: header %q, body %s vs %s", again.header.Get("Idempotent-Replay"), again.body, first.body)
	}
	want(t, "reused", a.call("POST", "/api/orders", `{"sku":"hot","qty":3,"user":"ann"}`, "Idempotency-Key", "abc-1"), 422, "idempotency_key_reused")

	// Concurrent duplicates across two variants still make one order.
	var wg sync.WaitGroup
	bodies := make([]string, 20)
	for i := range bodies {
		wg.Go(func() {
			v := lock.Redlock
			if i%2 == 0 {
				v = ladder.None
			}
			r := a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"bob"}`, "Idempotency-Key", "dup", "X-Lock-Variant", v)
			if r.status != 201 {
				t.Errorf("duplicate %d: %d %s", i, r.status, r.body)
			}
			var o struct{ ID int }
			_ = json.Unmarshal(r.body, &o)
			bodies[i] = fmt.Sprint(o.ID)
		})
	}
	wg.Wait()
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("duplicates got different orders: %v", bodies)
		}
	}
	seat := a.call("POST", "/api/events/gala/seats/A1", `{"user":"ann"}`, "Idempotency-Key", "seat-1")
	want(t, "seat", seat, 201, "")
	seat2 := a.call("POST", "/api/events/gala/seats/A1", `{"user":"ann"}`, "Idempotency-Key", "seat-1")
	want(t, "seat replay", seat2, 201, "")
	if seat2.header.Get("Idempotent-Replay") != "true" {
		t.Fatal("seat replay not marked")
	}
	if au := a.audit(); !au.OK || au.Orders != 2 || au.SoldUnits != 3 {
		t.Fatalf("audit %+v", au)
	}
}

func TestLockBusyAndUnavailable(t *testing.T) {
	testsupport.Long(t, "waits out limits, deadlines and streams for seconds")
	a := newApp(t, appOpts{nodes: 3, wait: 300 * time.Millisecond})
	a.reset(5, 3)
	ctx := context.Background()
	held, err := a.lockers.Locker(lock.Lua)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := held.Acquire(ctx, "sku:hot")
	if err != nil {
		t.Fatal(err)
	}
	r := a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, "X-Lock-Variant", lock.Lua)
	want(t, "busy", r, 503, "lock_busy")
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("busy without Retry-After: %v", r.header)
	}
	seatLease, err := held.Acquire(ctx, "seat:gala:A1")
	if err != nil {
		t.Fatal(err)
	}
	want(t, "seat busy", a.call("POST", "/api/events/gala/seats/A1", `{"user":"ann"}`, "X-Lock-Variant", lock.Lua), 503, "lock_busy")
	lease.Release(ctx)
	seatLease.Release(ctx)

	// Two of three nodes down: no quorum for redlock, and the first node
	// (the single-node variants' one) is among them.
	for _, n := range a.nodes.Nodes[:2] {
		if err := n.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{lock.Redlock, lock.RedlockFence, lock.Lua, ladder.SetNXExpire} {
		r := a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, "X-Lock-Variant", v)
		want(t, v+" unavailable", r, 503, "lock_unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s: unavailable without Retry-After", v)
		}
	}
	want(t, "seat unavailable", a.call("POST", "/api/events/gala/seats/A1", `{"user":"ann"}`), 503, "lock_unavailable")
	ready := a.call("GET", "/readyz", nil)
	want(t, "readyz without quorum", ready, 503, "not_ready")
	// The public answer counts the nodes; it names none of them.
	if !strings.Contains(string(ready.body), "1 of 3 nodes answer, 2 needed") {
		t.Errorf("readyz without quorum does not count the nodes: %s", ready.body)
	}
	for _, addr := range a.nodes.Addrs() {
		_, port, _ := net.SplitHostPort(addr)
		if strings.Contains(string(ready.body), addr) || strings.Contains(string(ready.body), ":"+port) {
			t.Errorf("readyz names the node %s: %s", addr, ready.body)
		}
	}
	for _, n := range a.nodes.Nodes[:2] {
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// go-redis waits a moment before dialling a node that refused it again.
	au := a.audit()
	for deadline := time.Now().Add(10 * time.Second); len(au.Errors) > 0 && time.Now().Before(deadline); au = a.audit() {
		time.Sleep(100 * time.Millisecond)
	}
	if !au.OK || au.Orders != 0 || au.Bookings != 0 {
		t.Fatalf("nothing may be written while the lock is busy or unavailable: %+v", au)
	}
}

func TestHolderCrashedAndStaleFence(t *testing.T) {
	a := newApp(t, appOpts{nodes: 1, ttl: 150 * time.Millisecond, wait: 3 * time.Second})
	a.reset(10, 3)
	plan := `{"seed":3,"work_ms":0,"faults":[{"point":"after-acquire-step1","action":"crash","p":1}]}`
	want(t, "set crash", a.call("PUT", "/api/admin/faults", plan, admin...), 200, "")
	r := a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, "X-Lock-Variant", lock.Lua)
	want(t, "crashed", r, 503, "holder_crashed")

	// The pause outlasts the 150 ms lease by far, so that the second holder
	// is in (its token issued) before the first wakes, on a loaded machine
	// too. The first order waits out the crashed holder's lock itself.
	plan = `{"seed":3,"work_ms":0,"faults":[{"point":"in-critical-section","action":"pause","p":1,"ms":1500}]}`
	want(t, "set pause", a.call("PUT", "/api/admin/faults", plan, admin...), 200, "")
	first := make(chan response, 1)
	go func() {
		first <- a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, "X-Lock-Variant", lock.LuaFence)
	}()
	a.awaitMetric(`flashsale_faults_fired_total{action="pause",point="in-critical-section"} 1`, 5*time.Second) // ann holds, paused
	second := a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"bob"}`, "X-Lock-Variant", lock.LuaFence)
	want(t, "newer holder", second, 201, "")
	want(t, "stale holder", <-first, 409, "stale_fence")
	if au := a.audit(); !au.OK || au.SoldUnits != 1 {
		t.Fatalf("audit %+v", au)
	}
	metrics := string(a.call("GET", "/metrics", nil).body)
	for _, m := range []string{
		"flashsale_stale_fence_rejections_total 1",
		`flashsale_faults_fired_total{action="crash",point="after-acquire-step1"} 1`,
		`flashsale_faults_fired_total{action="pause",point="in-critical-section"} 2`,
		`flashsale_lock_acquire_seconds_count{outcome="crashed",variant="lua"} 1`,
		"flashsale_holder_crashes_total 1",
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
}

func TestAdminRoutes(t *testing.T) {
	a := newApp(t, appOpts{nodes: 1})
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     string
	}{
		{"reset without token", "POST", "/api/admin/reset", "", nil, 401, "unauthorized"},
		{"reset with a wrong token", "POST", "/api/admin/reset", "", []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
		{"reset with basic auth", "POST", "/api/admin/reset", "", []string{"Authorization", "Basic " + token}, 401, "unauthorized"},
		{"faults without token", "PUT", "/api/admin/faults", `{"seed":1}`, nil, 401, "unauthorized"},
		{"faults read without token", "GET", "/api/admin/faults", "", nil, 401, "unauthorized"},
		{"reset with defaults", "POST", "/api/admin/reset", "", admin, 200, ""},
		{"reset with a body", "POST", "/api/admin/reset", `{"products":[{"sku":"a","name":"A","price_cents":5,"stock":7}],"seats":12}`, admin, 200, ""},
		{"reset with seats only", "POST", "/api/admin/reset", `{"seats":0}`, admin, 200, ""},
		{"reset with too many seats", "POST", "/api/admin/reset", `{"seats":1001}`, admin, 422, "invalid_catalogue"},
		{"reset with negative stock", "POST", "/api/admin/reset", `{"products":[{"sku":"a","name":"A","stock":-1}]}`, admin, 422, "invalid_catalogue"},
		{"reset with a bad sku", "POST", "/api/admin/reset", `{"products":[{"sku":"a/b","name":"A","stock":1}]}`, admin, 422, "invalid_catalogue"},
		{"reset with twin skus", "POST", "/api/admin/reset", `{"products":[{"sku":"a","name":"A","stock":1},{"sku":"a","name":"B","stock":1}]}`, admin, 422, "invalid_catalogue"},
		{"reset with an unknown field", "POST", "/api/admin/reset", `{"products":[{"sku":"a","name":"A","stock":1,"colour":"red"}]}`, admin, 400, "unknown_field"},
		{"reset with malformed json", "POST", "/api/admin/reset", `{"seats":`, admin, 400, "bad_json"},
		{"fault after the lease check", "PUT", "/api/admin/faults", `{"seed":1,"faults":[{"point":"after-lease-check","action":"pause","p":0.1,"ms":10}],"watchdog":false}`, admin, 200, ""},
		{"faults", "PUT", "/api/admin/faults", `{"seed":42,"work_ms":5,"faults":[{"point":"in-critical-section","action":"pause","p":0.5,"ms":10}]}`, admin, 200, ""},
		{"faults read", "GET", "/api/admin/faults", "", admin, 200, ""},
		{"fault with an unknown point", "PUT", "/api/admin/faults", `{"seed":1,"faults":[{"point":"nowhere","action":"crash","p":1}]}`, admin, 422, "invalid_fault"},
		{"fault with an unknown action", "PUT", "/api/admin/faults", `{"seed":1,"faults":[{"point":"in-critical-section","action":"explode","p":1}]}`, admin, 422, "invalid_fault"},
		{"fault with p above 1", "PUT", "/api/admin/faults", `{"seed":1,"faults":[{"point":"in-critical-section","action":"crash","p":2}]}`, admin, 422, "invalid_fault"},
		{"negative work", "PUT", "/api/admin/faults", `{"seed":1,"work_ms":-1}`, admin, 422, "invalid_fault"},
		{"fault with an unknown field", "PUT", "/api/admin/faults", `{"seed":1,"faults":[{"point":"in-critical-section","action":"crash","p":1,"when":"now"}]}`, admin, 400, "unknown_field"},
		{"faults without a body", "PUT", "/api/admin/faults", "", admin, 400, "bad_json"},
	}
	for _, c := range cases {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := a.call(c.method, c.path, body, c.hdr...)
		want(t, c.name, r, c.status, c.code)
		if c.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: no WWW-Authenticate challenge", c.name)
		}
	}
	r := a.call("GET", "/api/admin/faults", nil, admin...)
	var plan struct {
		Seed   uint64
		WorkMS int `json:"work_ms"`
		Faults []fault.Fault
	}
	r.decode(t, &plan)
	if plan.Seed != 42 || plan.WorkMS != 5 || len(plan.Faults) != 1 || a.svc.Work() != 5*time.Millisecond {
		t.Fatalf("a refused plan replaced the good one: %s", r.body)
	}
	r = a.call("GET", "/api/products", nil)
	var ps []inventory.Product
	r.decode(t, &ps)
	if len(ps) != len(inventory.DefaultCatalogue().Products) {
		t.Fatalf("seats-only reset keeps the default products: %s", r.body)
	}
}

func TestMetricsAndClientsThatGoAway(t *testing.T) {
	a := newApp(t, appOpts{nodes: 1, wait: 5 * time.Second})
	a.reset(5, 3)
	want(t, "order", a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, "X-Lock-Variant", lock.Lua), 201, "")
	want(t, "no such variant", a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"cy"}`, "X-Lock-Variant", "no-such-rung"), 400, "unknown_lock")
	a.audit()

	held, _ := a.lockers.Locker(lock.Lua)
	lease, err := held.Acquire(context.Background(), "sku:hot")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	r := a.callCtx(ctx, "POST", "/api/orders", `{"sku":"hot","qty":1,"user":"bob"}`, "X-Lock-Variant", lock.Lua)
	cancel()
	if r.status != -1 {
		t.Fatalf("the client gave up, yet got %d", r.status)
	}
	var metrics string
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		metrics = string(a.call("GET", "/metrics", nil).body)
		if strings.Contains(metrics, `flashsale_http_requests_total{code="499",route="/api/orders"} 1`) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range []string{
		`flashsale_http_requests_total{code="201",route="/api/orders"} 1`,
		`flashsale_http_requests_total{code="499",route="/api/orders"} 1`,
		`flashsale_http_requests_total{code="200",route="/api/admin/reset"} 1`,
		`flashsale_http_request_duration_seconds_count{route="/api/orders"}`,
		`flashsale_sale_duration_seconds_count{outcome="sale",variant="lua"} 1`,
		`flashsale_sale_duration_seconds_count{outcome="refused",variant="other"} 1`,
		`flashsale_sale_duration_seconds_count{outcome="error",variant="lua"} 1`,
		`flashsale_lock_acquire_seconds_count{outcome="acquired",variant="lua"}`,
		`flashsale_lock_tries_count{variant="lua"}`,
		`flashsale_lock_hold_seconds_count{variant="lua"} 1`,
		"flashsale_stale_fence_rejections_total 0",
		"flashsale_audit_ok 1",
		"flashsale_audit_sold_units 1",
		"flashsale_audit_orders 1",
		"flashsale_audit_oversold_units 0",
		"flashsale_audit_lost_updates 0",
		"flashsale_audit_double_booked_seats 0",
		"flashsale_audit_stuck_locks 0",
		"go_goroutines",
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
	if au := a.audit(); au.Orders != 1 {
		t.Fatalf("the abandoned request wrote an order: %+v", au)
	}
}

func TestStream(t *testing.T) {
	a := newApp(t, appOpts{nodes: 3})
	a.reset(5, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.url+"/api/stream", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan string, 16)
	heartbeats := make(chan struct{}, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			line := sc.Text()
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				events <- data
			} else if line == ": heartbeat" {
				select {
				case heartbeats <- struct{}{}:
				default:
				}
			}
		}
		close(events)
	}()
	select {
	case <-heartbeats:
	case <-ctx.Done():
		t.Fatal("no heartbeat")
	}
	// The relay may subscribe a moment after the stream opens: keep buying
	// until a change arrives.
	var got []string
	stock := ""
	for i := 0; stock == "" && i < 5; i++ {
		want(t, "order", a.call("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":"u%d"}`, i)), 201, "")
		timeout := time.After(time.Second)
	wait:
		for {
			select {
			case e := <-events:
				got = append(got, e)
				if strings.Contains(e, `"type":"stock"`) {
					stock = e
					break wait
				}
			case <-timeout:
				break wait
			}
		}
	}
	if !strings.Contains(stock, `"sku":"hot"`) || !strings.Contains(stock, `"stock":`) {
		t.Fatalf("stream events %v", got)
	}
	want(t, "grab", a.call("POST", "/api/events/gala/seats/A3", `{"user":"ann"}`), 201, "")
	for e := range events {
		if strings.Contains(e, `"type":"seat"`) {
			if !strings.Contains(e, `"seat":"A3"`) || strings.Contains(e, `"user"`) || strings.Contains(e, "ann") {
				t.Fatalf("seat event %s", e)
			}
			return
		}
	}
	t.Fatal("no seat event")
}

// lua+check: a holder paused past its TTL inside its work checks its lease
// before the write, finds it gone and writes nothing (409 lease_lost); the
// holder that took the lock meanwhile sells. The fault plan switches the
// watchdog at run time and reports it.
func TestLeaseLostAndTheWatchdogSwitch(t *testing.T) {
	a := newApp(t, appOpts{nodes: 1, ttl: 150 * time.Millisecond, wait: 3 * time.Second})
	a.reset(10, 3)
	for _, on := range []bool{true, false} {
		plan := fmt.Sprintf(`{"seed":1,"work_ms":0,"faults":[],"watchdog":%v}`, on)
		want(t, "set watchdog", a.call("PUT", "/api/admin/faults", plan, admin...), 200, "")
		var got struct {
			Watchdog *bool `json:"watchdog"`
		}
		if err := json.Unmarshal(a.call("GET", "/api/admin/faults", nil, admin...).body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Watchdog == nil || *got.Watchdog != on {
			t.Fatalf("the plan reports watchdog %v, want %v", got.Watchdog, on)
		}
	}

	plan := `{"seed":3,"work_ms":0,"faults":[{"point":"in-critical-section","action":"pause","p":1,"ms":600}]}`
	want(t, "set pause", a.call("PUT", "/api/admin/faults", plan, admin...), 200, "")
	first := make(chan response, 1)
	go func() {
		first <- a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, "X-Lock-Variant", ladder.LuaCheck)
	}()
	// Once the first holder is paused, the plan is cleared: the second
	// holder works without a pause.
	for deadline := time.Now().Add(5 * time.Second); ; {
		var got struct {
			Fired map[string]int `json:"fired"`
		}
		if err := json.Unmarshal(a.call("GET", "/api/admin/faults", nil, admin...).body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Fired["in-critical-section"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first holder never reached its pause")
		}
		time.Sleep(5 * time.Millisecond)
	}
	want(t, "clear faults", a.call("PUT", "/api/admin/faults", `{"seed":3,"work_ms":0,"faults":[]}`, admin...), 200, "")
	second := a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"bob"}`, "X-Lock-Variant", ladder.LuaCheck)
	want(t, "newer holder", second, 201, "")
	want(t, "holder whose lease ran out", <-first, 409, "lease_lost")
	if au := a.audit(); !au.OK || au.SoldUnits != 1 {
		t.Fatalf("audit %+v", au)
	}
}

// The fault plan switches batching under one lease at run time: given, it
// is set; absent, it stays; GET reports it. With it on, a crowd's orders
// each get their own answer and the sale is exact.
func TestBatchSwitch(t *testing.T) {
	a := newApp(t, appOpts{nodes: 1, wait: 5 * time.Second})
	a.reset(5, 0)
	for _, c := range []struct {
		plan string
		want bool
	}{{`{"batch":true}`, true}, {`{"work_ms":2}`, true}, {`{"batch":false}`, false}, {`{"work_ms":2,"batch":true}`, true}} {
		want(t, "set "+c.plan, a.call("PUT", "/api/admin/faults", c.plan, admin...), 200, "")
		var got struct {
			Batch *bool `json:"batch"`
		}
		if err := json.Unmarshal(a.call("GET", "/api/admin/faults", nil, admin...).body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Batch == nil || *got.Batch != c.want {
			t.Fatalf("after %s the plan reports batch %v, want %v", c.plan, got.Batch, c.want)
		}
	}
	statuses := make([]int, 20)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = a.call("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":"u%d"}`, i), "X-Lock-Variant", lock.RedlockFence).status
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[201] != 5 || count[409] != 15 {
		t.Fatalf("answers %v, want 5 × 201 and 15 × 409", count)
	}
	if au := a.audit(); !au.OK || au.Orders != 5 {
		t.Fatalf("audit %+v", au)
	}
}
