package handlers_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"flashsale/handlers"
)

// message is the message of an error answer.
func (r response) message() string {
	var e struct{ Message string }
	_ = json.Unmarshal(r.body, &e)
	return e.Message
}

// A body of null is not an object: every route that takes one refuses it
// as it refuses [1,2], and nothing changes (it cleared the fault plan and
// reset the sale). An empty reset body is still the default sale.
func TestNullBodyIsRefused(t *testing.T) {
	a := newApp(t, appOpts{})
	a.reset(7, 4)
	plan := `{"seed":3,"work_ms":0,"faults":[{"point":"in-critical-section","action":"pause","p":1,"ms":5}]}`
	want(t, "fault plan", a.call("PUT", "/api/admin/faults", plan, admin...), 200, "")
	cases := []struct{ method, path string }{
		{"POST", "/api/orders"},
		{"POST", "/api/events/gala/seats/A1"},
		{"PUT", "/api/admin/faults"},
		{"POST", "/api/admin/reset"},
		{"POST", "/api/admin/workshop/runs"},
		{"POST", "/api/admin/workshop/sequence"},
	}
	for _, tc := range cases {
		for _, body := range []string{`null`, ` null `, `[1,2]`, `"x"`, `3`} {
			r := a.call(tc.method, tc.path, body, admin...)
			want(t, tc.method+" "+tc.path+" "+body, r, 400, "bad_json")
			if !strings.Contains(r.message(), "the body must be a JSON object") {
				t.Errorf("%s %s %s: message %q", tc.method, tc.path, body, r.message())
			}
		}
	}
	var got struct{ Faults []any }
	a.call("GET", "/api/admin/faults", nil, admin...).decode(t, &got)
	if len(got.Faults) != 1 {
		t.Errorf("a refused body changed the fault plan: %v", got.Faults)
	}
	var products []struct{ Stock int64 }
	a.call("GET", "/api/products", nil).decode(t, &products)
	if len(products) != 1 || products[0].Stock != 7 {
		t.Errorf("a refused body reset the sale: %+v", products)
	}
	want(t, "empty reset body", a.call("POST", "/api/admin/reset", "", admin...), 200, "")
}

// The scheme of Authorization is case-insensitive; a refusal says where
// the token comes from.
func TestAdminScheme(t *testing.T) {
	a := newApp(t, appOpts{})
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "BeArEr"} {
		want(t, scheme, a.call("GET", "/api/admin/faults", nil, "Authorization", scheme+" "+token), 200, "")
	}
	for _, h := range []string{"", "Basic " + token, "Bearer", "Bearer wrong", "Bearer" + token, token} {
		r := a.call("GET", "/api/admin/faults", nil, "Authorization", h)
		want(t, "Authorization "+h, r, 401, "unauthorized")
		if !strings.Contains(r.message(), "-admin-token") || !strings.Contains(r.message(), "FLASHSALE_ADMIN_TOKEN") {
			t.Errorf("401 does not say where the token comes from: %q", r.message())
		}
	}
}

// A refused variant is named where the request named it (the header or the
// body's field), with the variants this instance allows.
func TestVariantRefusalNamesItsSource(t *testing.T) {
	a := newApp(t, appOpts{config: func(c *handlers.Config) { c.Workshop = stubRunner{} }})
	cases := []struct {
		name, body, hdr, source string
	}{
		{"empty field", `{"variant":"","scenario":"clean","rate":10,"duration_s":1}`, "", "field variant"},
		{"unknown field", `{"variant":"mutex","scenario":"clean","rate":10,"duration_s":1}`, "", "field variant"},
		{"unknown header", `{"sku":"hot","qty":1,"user":"ann"}`, "mutex", "X-Lock-Variant"},
	}
	for _, tc := range cases {
		path, hdr := "/api/admin/workshop/runs", admin
		if tc.hdr != "" {
			path, hdr = "/api/orders", []string{"X-Lock-Variant", tc.hdr}
		}
		r := a.call("POST", path, tc.body, hdr...)
		want(t, tc.name, r, 400, "unknown_lock")
		msg := r.message()
		if !strings.Contains(msg, tc.source) || !strings.Contains(msg, "redlock+fence") {
			t.Errorf("%s: %q does not name %s and list the variants", tc.name, msg, tc.source)
		}
		if tc.source != "X-Lock-Variant" && strings.Contains(msg, "X-Lock-Variant") {
			t.Errorf("%s: %q names a header the request did not send", tc.name, msg)
		}
	}
}

// An unknown event's answer names the event there is.
func TestUnknownEventNamesTheEvent(t *testing.T) {
	a := newApp(t, appOpts{})
	for _, path := range []string{"/api/events/opera/seats"} {
		r := a.call("GET", path, nil)
		want(t, path, r, 404, "unknown_event")
		if !strings.Contains(r.message(), `"gala"`) {
			t.Errorf("%s: %q names no event", path, r.message())
		}
	}
	r := a.call("POST", "/api/events/opera/seats/A1", `{"user":"ann"}`)
	want(t, "grab", r, 404, "unknown_event")
	if !strings.Contains(r.message(), `"gala"`) {
		t.Errorf("grab: %q names no event", r.message())
	}
}

// An integer too large for its field is told the range, not that it is no
// integer; a fraction is still told it must be one.
func TestIntegerOutOfRange(t *testing.T) {
	a := newApp(t, appOpts{})
	cases := []struct{ qty, says string }{
		{"99999999999999999999", "out of range: an integer from -9223372036854775808 to 9223372036854775807"},
		{"-99999999999999999999", "out of range"},
		{"1.5", "must be a JSON integer"},
		{"1e3", "must be a JSON integer"},
	}
	for _, tc := range cases {
		r := a.call("POST", "/api/orders", `{"sku":"hot","qty":`+tc.qty+`,"user":"ann"}`)
		want(t, "qty "+tc.qty, r, 400, "bad_json")
		if !strings.Contains(r.message(), tc.says) {
			t.Errorf("qty %s: %q, want it to say %q", tc.qty, r.message(), tc.says)
		}
	}
}

// GET /api lists every route the server serves, the pages and, to the
// admin token only, the workshop's admin routes.
func TestIndexListsEveryRoute(t *testing.T) {
	a := newApp(t, appOpts{})
	var anon struct{ Routes []string }
	a.call("GET", "/api", nil).decode(t, &anon)
	if len(anon.Routes) == 0 || !slices.Contains(anon.Routes, "GET /api/products") {
		t.Fatalf("GET /api without the token lists %v", anon.Routes)
	}
	for _, r := range anon.Routes {
		if strings.Contains(r, "/api/admin") {
			t.Errorf("GET /api without the token lists the admin route %s", r)
		}
	}
	var idx struct{ Routes []string }
	a.call("GET", "/api", nil, admin...).decode(t, &idx)
	routes := []string{
		"GET /", "GET /workshop", "GET /workshop/source/{variant}", "GET /static/*file", "GET /healthz", "GET /readyz", "GET /metrics", "GET /api",
		"GET /api/products", "POST /api/orders", "GET /api/orders",
		"GET /api/events/{event}/seats", "POST /api/events/{event}/seats/{seat}",
		"GET /api/audit", "GET /api/stream",
		"POST /api/admin/reset", "PUT /api/admin/faults", "GET /api/admin/faults", "GET /api/admin/audit",
		"POST /api/admin/workshop/runs", "GET /api/admin/workshop/runs", "GET /api/admin/workshop/runs/{id}",
		"GET /api/admin/workshop/runs/{id}/stream", "GET /api/admin/workshop/sequence", "POST /api/admin/workshop/sequence",
	}
	for _, r := range routes {
		if !slices.Contains(idx.Routes, r) {
			t.Errorf("GET /api leaves out %s", r)
		}
	}
	for _, r := range idx.Routes {
		method, path, _ := strings.Cut(r, " ")
		if !slices.Contains(routes, r) {
			t.Errorf("GET /api lists %s, which this test does not know", r)
			continue
		}
		// A stream never ends, so it is not called here.
		if strings.ContainsAny(path, "{*") || method != "GET" || strings.HasPrefix(path, "/api/admin") || path == "/api/stream" {
			continue
		}
		if got := a.call("GET", path, nil); got.status == 404 || got.status == 405 {
			t.Errorf("GET /api lists %s, which answers %d", r, got.status)
		}
	}
}
