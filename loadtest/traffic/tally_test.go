package traffic

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"flashsale/loadtest/storefront"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// result builds a vegeta result as the attacker would record it.
func result(seq uint64, key, path string, code uint16, body string) *vegeta.Result {
	t0 := time.Unix(1_700_000_000, 0)
	return &vegeta.Result{
		Attack: "redlock", Seq: seq, Code: code, Timestamp: t0.Add(time.Duration(seq) * 10 * time.Millisecond),
		Latency: 5 * time.Millisecond, URL: "http://127.0.0.1:1" + path + "#" + KeyFragment + key, Body: []byte(body),
	}
}

func order(id int, key string) string {
	return fmt.Sprintf(`{"id":%d,"sku":"hot","qty":1,"user":"u","lock":"redlock","fence":null,"idempotency_key":%q}`, id, key)
}

func TestTallyAndCrossCheck(t *testing.T) {
	tl := NewTally()
	tl.Add(result(0, "k1", "/api/orders", 201, order(1, "k1")))
	tl.Add(result(1, "k2", "/api/orders", 201, order(2, "k2")))
	tl.Add(result(2, "k1", "/api/orders", 201, order(1, "k1"))) // a replay
	tl.Add(result(3, "k3", "/api/orders", 409, `{"error":"sold_out","message":"…"}`))
	tl.Add(result(4, "k4", "/api/orders", 503, `{"error":"lock_busy","message":"…"}`))
	tl.Add(result(5, "k5", "/api/events/gala/seats/A1", 201, `{"id":9,"event":"gala","seat":"A1","idempotency_key":"k5"}`))
	tl.Add(result(6, "k6", "/api/events/gala/seats/A1", 409, `{"error":"seat_taken"}`))
	tl.Add(result(7, "k7", "/api/orders", 0, ``))
	s := tl.Summary()
	c := s.Counts
	if c.Requests != 8 || c.Created != 4 || c.Conflict != 2 || c.Unavailable != 1 || c.Other != 1 || c.Transport != 1 || c.Replays != 1 {
		t.Errorf("counts %+v", c)
	}
	if c.ByError["sold_out"] != 1 || c.ByError["lock_busy"] != 1 || c.ByError["seat_taken"] != 1 {
		t.Errorf("error codes %v", c.ByError)
	}
	if s.OrderKeys != 2 || s.BookingKeys != 1 || s.Sales != 3 || s.ConfirmedUnits != 2 {
		t.Errorf("summary %+v", s)
	}
	if s.SalesPerSecond <= 0 || s.P50 != 5*time.Millisecond {
		t.Errorf("sales/s %v, p50 %v", s.SalesPerSecond, s.P50)
	}
	one := int64(1)
	cases := []struct {
		name  string
		audit storefront.Audit
		want  []string // substrings, one per expected problem
	}{
		{"agrees", storefront.Audit{Orders: 2, SoldUnits: 2, Bookings: &one}, nil},
		{"invented", storefront.Audit{Orders: 3, SoldUnits: 3, Bookings: &one}, []string{"invented orders", "sold units"}},
		{"lost", storefront.Audit{Orders: 1, SoldUnits: 1, Bookings: &one}, []string{"lost orders", "sold units"}},
		{"lost booking", storefront.Audit{Orders: 2, SoldUnits: 2, Bookings: new(int64)}, []string{"lost bookings"}},
		{"no booking figure", storefront.Audit{Orders: 2, SoldUnits: 2}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CrossCheck(s, tc.audit)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

// Answers that contradict each other are problems on their own, whatever
// the audit says.
func TestTallySeesContradictions(t *testing.T) {
	tl := NewTally()
	tl.Add(result(0, "k1", "/api/orders", 201, order(1, "k1")))
	tl.Add(result(1, "k1", "/api/orders", 201, order(2, "k1"))) // one key, two orders
	tl.Add(result(2, "k2", "/api/orders", 201, order(1, "k2"))) // one order, two keys
	tl.Add(result(3, "k3", "/api/orders", 201, order(3, "other")))
	tl.Add(result(4, "k4", "/api/orders", 201, `not json`))
	s := tl.Summary()
	all := strings.Join(CrossCheck(s, storefront.Audit{Orders: 3, SoldUnits: 3}), "\n")
	for _, want := range []string{"k1 was confirmed with 2 different orders", "confirmed under more than one key", "says its key is other", "carries no order id"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not mention %q:\n%s", want, all)
		}
	}
}

// A resend answered from the record is a replay: counted apart from the
// sales and timed in a bucket of its own. The first sold_out answer says
// when the stock ran out, and the sales answered before it are the sale
// rate while the stock lasted.
func TestTallyReplaysAndStockOut(t *testing.T) {
	tl := NewTally()
	tl.Add(result(0, "k1", "/api/orders", 201, order(1, "k1")))         // answered at 5 ms
	tl.Add(result(1, "k2", "/api/orders", 201, order(2, "k2")))         // 15 ms
	tl.Add(result(2, "k1", "/api/orders", 201, order(1, "k1")))         // a replay, 25 ms
	tl.Add(result(3, "k3", "/api/orders", 409, `{"error":"sold_out"}`)) // 35 ms: the stock ran out
	tl.Add(result(4, "k4", "/api/orders", 201, order(4, "k4")))         // 45 ms, another SKU
	tl.Add(result(5, "k5", "/api/events/gala/seats/A1", 409, `{"error":"seat_taken"}`))
	s := tl.Summary()
	if s.Sales != 3 || s.Counts.Replays != 1 || s.Counts.Created != 4 {
		t.Errorf("%d sales, %d replays, %d 201s; want 3, 1, 4", s.Sales, s.Counts.Replays, s.Counts.Created)
	}
	if sale, replay := s.Latency[OutcomeSale], s.Latency[OutcomeReplay]; sale.Count != s.Sales || replay.Count != s.Counts.Replays {
		t.Errorf("latency: %d sales, %d replays timed; want %d and %d", sale.Count, replay.Count, s.Sales, s.Counts.Replays)
	}
	if want := 35 * time.Millisecond; s.StockRanOut != want {
		t.Errorf("the stock ran out after %v, want %v (the first sold_out answer)", s.StockRanOut, want)
	}
	if want := 2 / (35 * time.Millisecond).Seconds(); s.SalesPerSecondInStock != want {
		t.Errorf("%.2f sales/s while the stock lasted, want %.2f (the two sales answered before it ran out)", s.SalesPerSecondInStock, want)
	}

	lasted := NewTally()
	lasted.Add(result(0, "k1", "/api/orders", 201, order(1, "k1")))
	if s := lasted.Summary(); s.StockRanOut != 0 || s.SalesPerSecondInStock != 0 {
		t.Errorf("no sold_out answer, yet the stock ran out after %v (%.1f/s)", s.StockRanOut, s.SalesPerSecondInStock)
	}
}
