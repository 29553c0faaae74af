package handlers_test

import (
	"testing"

	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// PostgreSQL going away (its link cut: dials refused, connections reset)
// turns orders, seat grabs and reads into 503 store_unavailable with a
// Retry-After, never a 500, and /readyz into 503 not_ready. With the link
// back, orders sell again.
func TestStoreDownIs503(t *testing.T) {
	testsupport.Long(t, "waits out limits, deadlines and streams for seconds")
	dsn, link := testsupport.ProxiedPostgres(t)
	a := newApp(t, appOpts{nodes: 1, db: dsn})
	a.reset(10, 4)
	link.Cut()
	order := func() response {
		return a.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ann"}`, "X-Lock-Variant", lock.Lua)
	}
	for _, c := range []struct {
		name string
		r    response
	}{
		{"order", order()},
		{"seat", a.call("POST", "/api/events/gala/seats/A1", `{"user":"ann"}`, "X-Lock-Variant", lock.Lua)},
		{"products", a.call("GET", "/api/products", nil)},
	} {
		want(t, c.name+" with the database down", c.r, 503, "store_unavailable")
		if c.r.header.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", c.name)
		}
	}
	want(t, "readyz with the database down", a.call("GET", "/readyz", nil), 503, "not_ready")
	link.Mend(t)
	// A connection the cut broke may still sit in the pool: it answers 503
	// once and is dropped.
	for range 20 {
		r := order()
		if r.status == 201 {
			want(t, "readyz with the database back", a.call("GET", "/readyz", nil), 200, "")
			return
		}
		want(t, "order while the pool recovers", r, 503, "store_unavailable")
	}
	t.Fatal("with the database back, 20 orders in a row answered 503")
}
