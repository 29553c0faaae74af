package traffic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"flashsale/loadtest/storefront"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Counts is how the answers to one cell's requests came back, by status.
// Vegeta's own Success ratio is not used: it counts a 409 sold_out, the
// right answer once stock is gone, as a failure.
type Counts struct {
	Requests int `json:"requests"`
	// Created is every 201, duplicates included.
	Created int `json:"201"`
	// Conflict is every 409: sold_out, seat_taken, and stale_fence when a
	// fenced store refused a stale holder.
	Conflict int `json:"409"`
	// Unavailable is every 503: lock_busy, lock_unavailable, holder_crashed.
	Unavailable int `json:"503"`
	// Other is everything else, transport errors (status 0) included.
	Other int `json:"other"`
	// Transport is the requests that got no HTTP answer at all.
	Transport int `json:"transport_errors"`
	// Replays is the 2xx answers to a key that already had one: a resent
	// request answered with its earlier order, as idempotency demands.
	Replays int `json:"replays"`
	// ByError counts the error codes of the answers that were not 2xx.
	ByError map[string]int `json:"by_error,omitempty"`
}

// confirmation is what the 2xx answers to one Idempotency-Key said.
type confirmation struct {
	ids     map[string]bool
	qty     int64
	answers int
}

// Tally accumulates vegeta's results of one cell: counts by status, the
// orders and bookings each Idempotency-Key was confirmed with, and latency.
// It is fed one result at a time, so no cell's results are held in memory.
type Tally struct {
	metrics  vegeta.Metrics
	counts   Counts
	orders   map[string]*confirmation
	bookings map[string]*confirmation
	sales    int
	problems []string
	latency  Latencies
	// first is when the first request was sent; soldOut when the first
	// sold_out answer came back (zero: none did); salesAt when each sale's
	// answer came back, eight bytes a sale.
	first, soldOut time.Time
	salesAt        []time.Time
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{
		counts:   Counts{ByError: map[string]int{}},
		orders:   map[string]*confirmation{},
		bookings: map[string]*confirmation{},
	}
}

// answer is the part of an order or booking (2xx) or an error answer that
// the tally reads. ID is raw because the contract does not fix its type.
type answer struct {
	ID             json.RawMessage `json:"id"`
	Qty            *int64          `json:"qty"`
	IdempotencyKey string          `json:"idempotency_key"`
	Error          string          `json:"error"`
}

// Add counts one result.
func (t *Tally) Add(r *vegeta.Result) {
	t.metrics.Add(r)
	t.counts.Requests++
	if t.first.IsZero() || r.Timestamp.Before(t.first) {
		t.first = r.Timestamp
	}
	t.latency.Add(t.count(r), r.Latency)
}

// count counts one result by status, error code and key, and says its
// outcome: a 2xx to a key already confirmed is a replay, not a sale.
func (t *Tally) count(r *vegeta.Result) string {
	outcome := OutcomeOf(r.Code)
	switch {
	case r.Code == 0:
		t.counts.Transport++
		t.counts.Other++
		t.counts.ByError["transport: "+shortErr(r.Error)]++
		return outcome
	case r.Code == 201:
		t.counts.Created++
	case r.Code == 409:
		t.counts.Conflict++
	case r.Code == 503:
		t.counts.Unavailable++
	default:
		t.counts.Other++
	}
	answered := r.Timestamp.Add(r.Latency)
	var a answer
	_ = json.Unmarshal(r.Body, &a) // a body that is not JSON leaves a empty, which is reported below
	if r.Code/100 != 2 {
		code := a.Error
		if code == "" {
			code = fmt.Sprintf("HTTP %d", r.Code)
		}
		t.counts.ByError[code]++
		if code == "sold_out" && (t.soldOut.IsZero() || answered.Before(t.soldOut)) {
			t.soldOut = answered
		}
		return outcome
	}
	key := keyOf(r.URL)
	book := t.orders
	what := "order"
	if isSeat(r.URL) {
		book, what = t.bookings, "booking"
	}
	id := string(bytes.TrimSpace(a.ID))
	if id == "" || id == "null" {
		t.problemf("a %d answer to %s carries no %s id", r.Code, key, what)
		return outcome
	}
	if a.IdempotencyKey != "" && a.IdempotencyKey != key {
		t.problemf("the %s answering key %s says its key is %s", what, key, a.IdempotencyKey)
	}
	c := book[key]
	if c == nil {
		c = &confirmation{ids: map[string]bool{}}
		book[key] = c
		t.sales++
		t.salesAt = append(t.salesAt, answered)
	} else {
		t.counts.Replays++
		outcome = OutcomeReplay
	}
	c.answers++
	c.ids[id] = true
	if a.Qty != nil {
		c.qty = *a.Qty
	} else if what == "order" {
		c.qty = 1 // an order that does not say its units has at least one
	}
	return outcome
}

func (t *Tally) problemf(format string, args ...any) {
	if len(t.problems) < 20 { // enough to show the pattern, not a flood
		t.problems = append(t.problems, fmt.Sprintf(format, args...))
	}
}

// isSeat tells a seat grab from a purchase by the path vegeta recorded.
func isSeat(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && strings.Contains(u.Path, "/seats/")
}

func shortErr(s string) string {
	// "Post \"http://…\": dial tcp …: connection refused" → the last part.
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// Summary is what the tally says once the attack is over.
type Summary struct {
	Counts Counts `json:"counts"`
	// Sales is the distinct orders and bookings confirmed (the first 2xx
	// of each Idempotency-Key).
	Sales int `json:"sales"`
	// OrderKeys and BookingKeys are the distinct keys confirmed by a 2xx.
	OrderKeys   int `json:"order_keys"`
	BookingKeys int `json:"booking_keys"`
	// ConfirmedUnits is the units of the confirmed orders, each order once.
	ConfirmedUnits int64 `json:"confirmed_units"`
	// SalesPerSecond is Sales over the attack's send window (first to last
	// request sent): the throughput of completed sales. The window is the
	// same for every variant of a column, so a sale that waited long for its
	// lock still counts, and one slow straggler does not move the figure.
	// Where the stock ran out before the attack ended, it is the stock's
	// figure, not the store's: read SalesPerSecondInStock.
	SalesPerSecond float64 `json:"sales_per_second"`
	// StockRanOut is when the first sold_out answer came back, counted from
	// the first request sent; 0 when none came (the stock lasted).
	StockRanOut time.Duration `json:"stock_ran_out_after_ns,omitempty"`
	// SalesPerSecondInStock is the sales answered before StockRanOut, per
	// second of it: the sale rate while the stock lasted (0 when it lasted
	// the whole attack, where SalesPerSecond is that rate).
	SalesPerSecondInStock float64       `json:"sales_per_second_in_stock,omitempty"`
	P50                   time.Duration `json:"p50_ns"`
	P99                   time.Duration `json:"p99_ns"`
	Duration              time.Duration `json:"duration_ns"`
	// Offered is the rate the attack was asked for, requests a second (0
	// where the caller did not say), and Sent the rate vegeta really sent
	// over its send window: below the offered rate when every worker was
	// busy, and then the latencies are optimistic (OmissionNote).
	Offered float64 `json:"offered_per_second,omitempty"`
	Sent    float64 `json:"sent_per_second"`
	// Latency is the latency percentiles of each outcome (Outcomes) that
	// occurred: a sale, a replay, a refusal and a shed answer are told
	// apart.
	Latency map[string]Percentiles `json:"latency_by_outcome,omitempty"`
	// Problems are answers that contradict each other on their own.
	Problems []string `json:"problems,omitempty"`
}

// Summary closes the latency metrics and sums up. Call it once, after the
// last Add.
func (t *Tally) Summary() Summary {
	t.metrics.Close()
	s := Summary{
		Counts:      t.counts,
		Sales:       t.sales,
		OrderKeys:   len(t.orders),
		BookingKeys: len(t.bookings),
		P50:         t.metrics.Latencies.P50,
		P99:         t.metrics.Latencies.P99,
		Duration:    t.metrics.Duration + t.metrics.Wait,
		Sent:        t.metrics.Rate,
		Problems:    append([]string(nil), t.problems...),
		Latency:     t.latency.ByOutcome(),
	}
	if window := t.metrics.Duration; t.sales > 0 && window > 0 {
		s.SalesPerSecond = float64(t.sales) / window.Seconds()
	}
	if !t.soldOut.IsZero() && t.soldOut.After(t.first) {
		s.StockRanOut = t.soldOut.Sub(t.first)
		n := 0
		for _, at := range t.salesAt {
			if at.Before(t.soldOut) {
				n++
			}
		}
		s.SalesPerSecondInStock = float64(n) / s.StockRanOut.Seconds()
	}
	for _, key := range sortedKeys(t.orders) {
		c := t.orders[key]
		s.ConfirmedUnits += c.qty
		if len(c.ids) > 1 {
			s.Problems = append(s.Problems, fmt.Sprintf("key %s was confirmed with %d different orders", key, len(c.ids)))
		}
	}
	for _, key := range sortedKeys(t.bookings) {
		if c := t.bookings[key]; len(c.ids) > 1 {
			s.Problems = append(s.Problems, fmt.Sprintf("key %s was confirmed with %d different bookings", key, len(c.ids)))
		}
	}
	if dup := sharedIDs(t.orders); dup > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%d orders were confirmed under more than one key", dup))
	}
	if dup := sharedIDs(t.bookings); dup > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%d bookings were confirmed under more than one key", dup))
	}
	return s
}

func sortedKeys(m map[string]*confirmation) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sharedIDs counts ids that confirm more than one key.
func sharedIDs(m map[string]*confirmation) int {
	seen := map[string]int{}
	for _, c := range m {
		for id := range c.ids {
			seen[id]++
		}
	}
	n := 0
	for _, k := range seen {
		if k > 1 {
			n++
		}
	}
	return n
}

// CrossCheck compares the database audit with what vegeta saw and returns
// every disagreement. Each confirmed key must have exactly one order in the
// database and each order its confirmation: distinct 201 keys == orders,
// and their units == the units sold.
func CrossCheck(s Summary, a storefront.Audit) []string {
	out := append([]string(nil), s.Problems...)
	switch d := a.Orders - int64(s.OrderKeys); {
	case d > 0:
		out = append(out, fmt.Sprintf("invented orders: the database has %d orders, clients saw %d confirmed (%d without a 201)", a.Orders, s.OrderKeys, d))
	case d < 0:
		out = append(out, fmt.Sprintf("lost orders: clients saw %d orders confirmed, the database has %d (%d 201s without an order)", s.OrderKeys, a.Orders, -d))
	}
	if a.SoldUnits != s.ConfirmedUnits {
		out = append(out, fmt.Sprintf("sold units: the database says %d, the confirmed orders add up to %d", a.SoldUnits, s.ConfirmedUnits))
	}
	if a.Bookings != nil {
		switch d := *a.Bookings - int64(s.BookingKeys); {
		case d > 0:
			out = append(out, fmt.Sprintf("invented bookings: the database has %d, clients saw %d confirmed", *a.Bookings, s.BookingKeys))
		case d < 0:
			out = append(out, fmt.Sprintf("lost bookings: clients saw %d bookings confirmed, the database has %d", s.BookingKeys, *a.Bookings))
		}
	}
	return out
}
