package handlers_test

import (
	"bufio"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"flashsale/curriculum"
	"flashsale/handlers"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// A client from the room: the test's requests come from 127.0.0.1, a
// trusted proxy here, which forwards for this address.
var room = []string{"X-Forwarded-For", "192.0.2.7"}

// roomApp trusts the loopback proxy, so a request names its client in
// X-Forwarded-For; change adds to the configuration.
func roomApp(t *testing.T, change func(*handlers.Config)) *app {
	return newApp(t, appOpts{config: func(c *handlers.Config) {
		c.TrustedProxies = []string{"127.0.0.1"}
		if change != nil {
			change(c)
		}
	}})
}

// In workshop mode a client from the room may not name a broken rung:
// 400 variant_not_allowed saying how the facilitator opens it, nothing
// sold. This machine's own clients and the admin token may, a correct rung
// anyone may, and -open-ladder opens them all to the room. GET /api lists
// what the caller may name.
func TestBrokenRungsStayOffTheRoom(t *testing.T) {
	a := roomApp(t, nil)
	a.reset(100, 4)
	order := `{"sku":"hot","qty":1,"user":"ann"}`
	for _, v := range []string{ladder.None, "setnx-expire", "get-del", "plain-del"} {
		r := a.call("POST", "/api/orders", order, append([]string{"X-Lock-Variant", v}, room...)...)
		want(t, "the room names "+v, r, 400, "variant_not_allowed")
		if !strings.Contains(r.message(), "-open-ladder") {
			t.Errorf("the refusal of %s does not say how to open the ladder: %s", v, r.message())
		}
	}
	want(t, "the room grabs a seat with none", a.call("POST", "/api/events/gala/seats/A1", `{"user":"ann"}`,
		append([]string{"X-Lock-Variant", ladder.None}, room...)...), 400, "variant_not_allowed")
	if au := a.audit(); au.Orders != 0 || au.Bookings != 0 {
		t.Fatalf("refused requests sold: %+v", au)
	}
	// The controls: the same request from this machine, or with the token;
	// a correct rung and the default from the room.
	r := a.call("POST", "/api/orders", order, "X-Lock-Variant", ladder.None)
	want(t, "this machine names none", r, 201, "")
	r = a.call("POST", "/api/orders", order, append([]string{"X-Lock-Variant", ladder.None}, append(room, admin...)...)...)
	want(t, "the room names none with the admin token", r, 201, "")
	want(t, "the room names lua", a.call("POST", "/api/orders", order, append([]string{"X-Lock-Variant", lock.Lua}, room...)...), 201, "")
	want(t, "the room with no header", a.call("POST", "/api/orders", order, room...), 201, "")

	var fromRoom, fromHere struct{ Locks []string }
	a.call("GET", "/api", nil, room...).decode(t, &fromRoom)
	a.call("GET", "/api", nil).decode(t, &fromHere)
	if slices.Contains(fromRoom.Locks, ladder.None) || !slices.Contains(fromRoom.Locks, lock.Lua) || !slices.Contains(fromRoom.Locks, lock.Redlock) {
		t.Errorf("GET /api from the room lists %v", fromRoom.Locks)
	}
	if !slices.Equal(fromHere.Locks, curriculum.Names()) {
		t.Errorf("GET /api from this machine lists %v, want every variant", fromHere.Locks)
	}

	open := roomApp(t, func(c *handlers.Config) { c.OpenLadder = true })
	open.reset(100, 4)
	r = open.call("POST", "/api/orders", order, append([]string{"X-Lock-Variant", ladder.None}, room...)...)
	want(t, "the room names none with the ladder open", r, 201, "")
	var o struct{ Lock string }
	r.decode(t, &o)
	if o.Lock != ladder.None {
		t.Errorf("the open ladder's order ran under %q", o.Lock)
	}
}

// With the order rate sparing this machine (workshop mode's default), a
// client from the room is held to it, ladder open or not, while this
// machine's own clients (the load runner) are not.
func TestRoomOrderRate(t *testing.T) {
	a := roomApp(t, func(c *handlers.Config) {
		c.OpenLadder = true
		c.OrderRate, c.OrderBurst, c.OrderRateSparesOwnMachine = 0.001, 2, true // one more every 1000 s
	})
	a.reset(100, 4)
	order := `{"sku":"hot","qty":1,"user":"ann"}`
	for range 2 {
		want(t, "a room order within the burst", a.call("POST", "/api/orders", order, append([]string{"X-Lock-Variant", ladder.None}, room...)...), 201, "")
	}
	r := a.call("POST", "/api/orders", order, append([]string{"X-Lock-Variant", ladder.None}, room...)...)
	want(t, "a room order past the burst", r, 429, "rate_limited")
	if r.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	for range 5 {
		want(t, "this machine past the room's burst", a.call("POST", "/api/orders", order, "X-Lock-Variant", ladder.None), 201, "")
	}
	want(t, "another room client", a.call("POST", "/api/orders", order, "X-Forwarded-For", "192.0.2.8"), 201, "")
}

// Wrong admin tokens from one address: loginBurst of them are answered
// 401, the next 429 too_many_logins, even with the right token, until the
// address has waited; another address with the right token is served.
func TestFailedLoginsAreLimited(t *testing.T) {
	a := roomApp(t, nil)
	wrong := append([]string{"Authorization", "Bearer not-the-token"}, room...)
	for range 10 {
		want(t, "a wrong token", a.call("GET", "/api/admin/faults", nil, wrong...), 401, "unauthorized")
	}
	r := a.call("GET", "/api/admin/faults", nil, wrong...)
	want(t, "one wrong token too many", r, 429, "too_many_logins")
	if r.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	want(t, "the right token from the same address", a.call("GET", "/api/admin/faults", nil, append(admin, room...)...), 429, "too_many_logins")
	want(t, "the right token from another address", a.call("GET", "/api/admin/faults", nil, append(admin, "X-Forwarded-For", "192.0.2.8")...), 200, "")
	// No Authorization header is no guess: pages and shoppers never count.
	for range 20 {
		want(t, "no token", a.call("GET", "/api/admin/faults", nil, "X-Forwarded-For", "192.0.2.9"), 401, "unauthorized")
	}
	want(t, "the right token after tokenless calls", a.call("GET", "/api/admin/faults", nil, append(admin, "X-Forwarded-For", "192.0.2.9")...), 200, "")
	if m := a.metrics(); !strings.Contains(m, `flashsale_limit_refusals_total{limit="admin_logins"} 2`) {
		t.Errorf("refused logins not counted:\n%s", grepLines(m, "flashsale_limit_refusals_total"))
	}
}

// Every API answer, an error and an unknown route included, tells the
// browser not to sniff its type.
func TestNosniff(t *testing.T) {
	a := newApp(t, appOpts{})
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/products"}, {"GET", "/api"}, {"GET", "/healthz"}, {"GET", "/api/admin/faults"},
		{"GET", "/api/nope"}, {"DELETE", "/api/products"}, {"GET", "/metrics"},
	} {
		r := a.call(c.method, c.path, nil)
		if r.status == http.StatusOK && c.path == "/api/admin/faults" {
			t.Errorf("%s %s without the token: 200", c.method, c.path)
		}
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q", c.method, c.path, r.status, got)
		}
	}
}

// The server's write timeout cuts an answer that takes longer (here a sale
// whose work outlasts it), while a stream, which moves its deadline before
// each write, lives on past it.
func TestWriteTimeoutSparesStreams(t *testing.T) {
	const timeout = 500 * time.Millisecond
	a := newApp(t, appOpts{writeTimeout: timeout}) // heartbeats every 100 ms
	a.reset(10, 2)
	_, _, body := a.stream("/api/stream", "10.0.0.1")
	sc := bufio.NewScanner(body)
	beats, start := 0, time.Now()
	for beats < 3 || time.Since(start) < 2*timeout {
		if !sc.Scan() {
			t.Fatalf("the stream ended after %d heartbeats, %v in: %v", beats, time.Since(start), sc.Err())
		}
		if sc.Text() == ": heartbeat" {
			beats++
		}
	}
	body.Close()
	// The control: a sale whose work takes three times the timeout gets no
	// answer; the connection is cut.
	want(t, "work_ms", a.call("PUT", "/api/admin/faults", `{"seed":1,"work_ms":1500,"faults":[]}`, admin...), 200, "")
	if r := a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`); r.status != -1 {
		t.Errorf("a sale past the write timeout was answered %d %s", r.status, r.body)
	}
}
