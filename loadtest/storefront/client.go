// Package storefront is the load runner's client of the storefront: its public
// HTTP contract (the admin API to reset the sale and set faults, the
// audit, readiness, metrics), one instance at a time or all of them.
package storefront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"flashsale/internal/clock"
)

// Product is one product of the catalogue a reset starts the sale with.
type Product struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Stock      int64  `json:"stock"`
}

// Catalogue is the body of POST /api/admin/reset.
type Catalogue struct {
	Products []Product `json:"products"`
	Seats    int       `json:"seats"`
}

// Initial is the total stock the catalogue starts with.
func (c Catalogue) Initial() int64 {
	var n int64
	for _, p := range c.Products {
		n += p.Stock
	}
	return n
}

// Fault is one entry of the app's fault plan (PUT /api/admin/faults).
type Fault struct {
	Point  string  `json:"point"`
	Action string  `json:"action"`
	P      float64 `json:"p"`
	MS     int     `json:"ms,omitempty"`
}

// FaultPlan is the body of PUT /api/admin/faults.
type FaultPlan struct {
	Seed   uint64  `json:"seed"`
	WorkMS int     `json:"work_ms"`
	Faults []Fault `json:"faults"`
	// Watchdog switches the instance's lease watchdog; nil leaves it as is.
	Watchdog *bool `json:"watchdog,omitempty"`
	// Fast switches the instance's lock speed layer; nil leaves it as is.
	Fast *bool `json:"fast,omitempty"`
	// Batch switches the instance's batching under one lease; nil leaves it
	// as is.
	Batch *bool `json:"batch,omitempty"`
}

// Audit is GET /api/admin/audit: the app's check of the database and the
// Redis nodes, made when asked (the public GET /api/audit may serve one up
// to a second old, from before the cell's last sales). Fields beyond the
// contract are kept in Raw for the report.
type Audit struct {
	OK                bool  `json:"ok"`
	SoldUnits         int64 `json:"sold_units"`
	Orders            int64 `json:"orders"`
	OversoldUnits     int64 `json:"oversold_units"`
	LostUpdates       int64 `json:"lost_updates"`
	DoubleBookedSeats int64 `json:"double_booked_seats"`
	StuckLocks        int64 `json:"stuck_locks"`
	// Bookings is not in the contract; nil when the app does not report it.
	Bookings *int64 `json:"bookings,omitempty"`
	// Products is the audit per SKU, not in the contract either; empty when
	// the app does not report it.
	Products []ProductAudit `json:"products,omitempty"`
	// Raw is the audit exactly as the app sent it.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// ProductAudit is the audit of one SKU, where the app reports it.
type ProductAudit struct {
	SKU           string `json:"sku"`
	InitialStock  int64  `json:"initial_stock"`
	Stock         int64  `json:"stock"`
	SoldUnits     int64  `json:"sold_units"`
	OversoldUnits int64  `json:"oversold_units"`
	LostUpdates   int64  `json:"lost_updates"`
}

// API is a client of one storefront instance's HTTP contract.
type API struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// APIError is a non-success answer, with the app's error code when it
// sent one.
type APIError struct {
	Op     string
	Status int
	Code   string
	Body   string
}

// Error says which call failed, with the status, code and body.
func (e *APIError) Error() string {
	return fmt.Sprintf("%s: HTTP %d %s: %s", e.Op, e.Status, e.Code, strings.TrimSpace(e.Body))
}

func (a API) do(ctx context.Context, op, method, path string, in, out any, auth bool) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.Base+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+a.Token)
	}
	hc := a.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", op, err)
	}
	if res.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e) // an answer that is not JSON still reports its status
		return &APIError{Op: op, Status: res.StatusCode, Code: e.Error, Body: string(b)}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], b...)
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: decode answer: %w", op, err)
	}
	return nil
}

// LockStats is what an instance's metrics say of one lock variant's
// leases so far: the seconds they were held in all, how many were granted,
// and the tries that every acquire made, granted or not.
type LockStats struct {
	Held   float64 // seconds, summed over the leases
	Leases float64
	Tries  float64
}

// LockStats reads this instance's lock metrics for variant.
func (a API) LockStats(ctx context.Context, variant string) (LockStats, error) {
	var st LockStats
	raw, err := a.metrics(ctx)
	if err != nil {
		return st, err
	}
	label := `{variant="` + variant + `"}`
	for line := range strings.SplitSeq(raw, "\n") {
		name, value, ok := strings.Cut(line, label+" ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "flashsale_lock_hold_seconds_sum":
			dst = &st.Held
		case "flashsale_lock_hold_seconds_count":
			dst = &st.Leases
		case "flashsale_lock_tries_sum":
			dst = &st.Tries
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return st, fmt.Errorf("metrics: %s: %w", name, err)
		}
		*dst = v
	}
	return st, nil
}

// CPUSeconds reads the CPU time this instance's process has used since it
// started (process_cpu_seconds_total). ok is false where the instance's
// platform does not report it.
func (a API) CPUSeconds(ctx context.Context) (seconds float64, ok bool, err error) {
	raw, err := a.metrics(ctx)
	if err != nil {
		return 0, false, err
	}
	for line := range strings.SplitSeq(raw, "\n") {
		if value, found := strings.CutPrefix(line, "process_cpu_seconds_total "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return 0, false, fmt.Errorf("metrics: process_cpu_seconds_total: %w", err)
			}
			return v, true, nil
		}
	}
	return 0, false, nil
}

// metrics reads the instance's Prometheus text.
func (a API) metrics(ctx context.Context) (string, error) {
	var raw json.RawMessage
	if err := a.do(ctx, "metrics", http.MethodGet, "/metrics", nil, &raw, false); err != nil {
		return "", err
	}
	return string(raw), nil
}

// ResetState is what the runner needs from a reset's answer.
type ResetState struct {
	Event string `json:"event"`
	Seats int    `json:"seats"`
}

// Reset starts a clean sale: the catalogue's stock and seats, no orders,
// bookings or lock keys.
func (a API) Reset(ctx context.Context, c Catalogue) (ResetState, error) {
	var st ResetState
	err := a.do(ctx, "reset the sale", http.MethodPost, "/api/admin/reset", c, &st, true)
	return st, err
}

// SetFaults replaces the instance's fault plan and business work.
func (a API) SetFaults(ctx context.Context, p FaultPlan) error {
	if p.Faults == nil {
		p.Faults = []Fault{} // "no faults", not "faults missing"
	}
	return a.do(ctx, "set faults", http.MethodPut, "/api/admin/faults", p, nil, true)
}

// Fired reads how often each fault point has fired on the instance since
// its plan was last set.
func (a API) Fired(ctx context.Context) (map[string]uint64, error) {
	var p struct {
		Fired map[string]uint64 `json:"fired"`
	}
	err := a.do(ctx, "read the fault plan", http.MethodGet, "/api/admin/faults", nil, &p, true)
	return p.Fired, err
}

// Audit reads a fresh audit, with the admin token.
func (a API) Audit(ctx context.Context) (Audit, error) {
	var raw json.RawMessage
	if err := a.do(ctx, "read the audit", http.MethodGet, "/api/admin/audit", nil, &raw, true); err != nil {
		return Audit{}, err
	}
	var au Audit
	if err := json.Unmarshal(raw, &au); err != nil {
		return Audit{}, fmt.Errorf("read the audit: decode: %w", err)
	}
	au.Raw = raw
	return au, nil
}

// Seats lists the seat labels of an event's seat map.
func (a API) Seats(ctx context.Context, event string) ([]string, error) {
	var m struct {
		Seats []struct {
			Seat string `json:"seat"`
		} `json:"seats"`
	}
	if err := a.do(ctx, "read the seat map", http.MethodGet, "/api/events/"+url.PathEscape(event)+"/seats", nil, &m, false); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m.Seats))
	for _, s := range m.Seats {
		out = append(out, s.Seat)
	}
	return out, nil
}

// Stock reads every SKU's stock from the product listing.
func (a API) Stock(ctx context.Context) (map[string]int64, error) {
	var ps []Product
	if err := a.do(ctx, "read the products", http.MethodGet, "/api/products", nil, &ps, false); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(ps))
	for _, p := range ps {
		out[p.SKU] = p.Stock
	}
	return out, nil
}

// Orders is how many orders the store has of user: what became of
// requests that got no answer, and whether a resend sold a second time.
// The route asks for the admin token: a user's orders are not public.
func (a API) Orders(ctx context.Context, user string) (int, error) {
	var os []json.RawMessage
	if err := a.do(ctx, "read a user's orders", http.MethodGet, "/api/orders?user="+url.QueryEscape(user), nil, &os, true); err != nil {
		return 0, err
	}
	return len(os), nil
}

// Holders reads an event's seat map: each seat's holder, "" when free. The
// holders' names are told to the admin token only.
func (a API) Holders(ctx context.Context, event string) (map[string]string, error) {
	var m struct {
		Seats []struct {
			Seat string `json:"seat"`
			User string `json:"user"`
		} `json:"seats"`
	}
	if err := a.do(ctx, "read the seat map", http.MethodGet, "/api/events/"+url.PathEscape(event)+"/seats", nil, &m, true); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m.Seats))
	for _, s := range m.Seats {
		out[s.Seat] = s.User
	}
	return out, nil
}

// Ready reports whether the instance answers /readyz with 200.
func (a API) Ready(ctx context.Context) error {
	return a.do(ctx, "readiness", http.MethodGet, "/readyz", nil, nil, false)
}

// WaitReady polls Ready until it succeeds or ctx ends.
func (a API) WaitReady(ctx context.Context) error {
	var last error
	for {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = a.Ready(c)
		cancel()
		if last == nil {
			return nil
		}
		if !clock.Sleep(ctx, 50*time.Millisecond) {
			return errors.Join(fmt.Errorf("%s not ready", a.Base), last, ctx.Err())
		}
	}
}

// Loopback accepts only http(s) URLs on a loopback address: the runner
// sends load nowhere else.
func Loopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("target %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("target %q: want an http:// or https:// URL", raw)
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("target %q is not on loopback: the load runner only sends traffic to 127.0.0.0/8, ::1 or localhost", raw)
}
