package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fakeAPI is a small in-memory stand-in for the storefront's JSON API of
// docs/design.md, used by the browser tests only while the real binary cannot be
// built (see startApp). It follows the contract's shapes and status codes;
// it has no locks and no load runner: a workshop run here produces a made-up
// cell, enough to exercise the page.
type fakeAPI struct {
	token string

	mu       sync.Mutex
	products []fakeProduct
	seats    []fakeSeat
	orders   int
	keys     map[string][]byte // Idempotency-Key → the 201 body
	subs     map[chan []byte]struct{}
	runs     []*fakeRun
}

type fakeProduct struct {
	SKU          string `json:"sku"`
	Name         string `json:"name"`
	PriceCents   int64  `json:"price_cents"`
	Stock        int64  `json:"stock"`
	InitialStock int64  `json:"initial_stock"`
}

type fakeSeat struct {
	Seat     string `json:"seat"`
	Row      string `json:"row"`
	Number   int    `json:"number"`
	Taken    bool   `json:"taken"`
	User     string `json:"user,omitempty"`
	Bookings int    `json:"bookings"`
}

type fakeRun struct {
	ID        int            `json:"id"`
	Variant   string         `json:"variant"`
	Scenario  string         `json:"scenario"`
	Rate      int            `json:"rate"`
	DurationS int            `json:"duration_s"`
	State     string         `json:"state"`
	StartedAt time.Time      `json:"started_at"`
	Cell      map[string]any `json:"cell,omitempty"`
	events    [][]byte
	changed   chan struct{} // closed and replaced on every new event
}

func newFakeAPI(token string) *fakeAPI {
	f := &fakeAPI{token: token, keys: map[string][]byte{}, subs: map[chan []byte]struct{}{}}
	f.reset(nil)
	return f
}

type fakeReset struct {
	Products []struct {
		SKU        string `json:"sku"`
		Name       string `json:"name"`
		PriceCents int64  `json:"price_cents"`
		Stock      int64  `json:"stock"`
	} `json:"products"`
	Seats int `json:"seats"`
}

func (f *fakeAPI) reset(r *fakeReset) {
	if r == nil || len(r.Products) == 0 {
		r = &fakeReset{Seats: 40}
		json.Unmarshal([]byte(`{"products":[{"sku":"tee","name":"Launch T-shirt","price_cents":1999,"stock":50},
			{"sku":"mug","name":"Limited mug","price_cents":1299,"stock":100},
			{"sku":"sneaker","name":"Drop sneaker","price_cents":12900,"stock":20}],"seats":40}`), r)
	}
	f.products = nil
	for _, p := range r.Products {
		f.products = append(f.products, fakeProduct{p.SKU, p.Name, p.PriceCents, p.Stock, p.Stock})
	}
	f.seats = nil
	for i := range r.Seats {
		row := string(rune('A' + i/10))
		f.seats = append(f.seats, fakeSeat{Seat: row + strconv.Itoa(i%10+1), Row: row, Number: i%10 + 1})
	}
	f.keys = map[string][]byte{}
}

// routes mounts the whole fake API.
func (f *fakeAPI) routes(mux *http.ServeMux) {
	f.storeRoutes(mux)
	f.workshopRoutes(mux)
}

// storeRoutes mounts the storefront and admin reset routes of the contract.
func (f *fakeAPI) storeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/products", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		writeJSON(w, 200, f.products)
	})
	mux.HandleFunc("POST /api/orders", f.order)
	mux.HandleFunc("GET /api/events/{event}/seats", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("event") != "gala" {
			writeError(w, 404, "unknown_event", "No event has this name.")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"event": "gala", "name": "Gala night", "seats": f.seats})
	})
	mux.HandleFunc("POST /api/events/{event}/seats/{seat}", f.grab)
	mux.HandleFunc("GET /api/stream", f.stream)
	mux.HandleFunc("POST /api/admin/reset", f.admin(func(w http.ResponseWriter, r *http.Request) {
		var body fakeReset
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.reset(&body)
		f.mu.Unlock()
		f.publish(map[string]any{"type": "reset"})
		writeJSON(w, 200, map[string]any{"ok": true})
	}))
}

// workshopRoutes mounts the workshop run API the page is written against.
func (f *fakeAPI) workshopRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/admin/workshop/runs", f.admin(f.startRun))
	mux.HandleFunc("GET /api/admin/workshop/runs", f.admin(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		out := []*fakeRun{}
		for i := len(f.runs) - 1; i >= 0; i-- {
			out = append(out, f.runs[i])
		}
		writeJSON(w, 200, out)
	}))
	mux.HandleFunc("GET /api/admin/workshop/runs/{id}/stream", f.admin(f.runStream))
}

func (f *fakeAPI) admin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			writeError(w, 401, "unauthorized", "This route needs Authorization: Bearer <admin token>.")
			return
		}
		next(w, r)
	}
}

func (f *fakeAPI) order(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SKU  string `json:"sku"`
		Qty  int64  `json:"qty"`
		User string `json:"user"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, 400, "bad_json", "The request body is not valid JSON of the expected shape.")
		return
	}
	if body.User == "" {
		writeError(w, 422, "invalid_user", "Give a user name of 1 to 64 printable characters.")
		return
	}
	if body.Qty < 1 || body.Qty > 10 {
		writeError(w, 422, "invalid_qty", "Order between 1 and 10 units.")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	if prev, ok := f.keys[key]; ok && key != "" {
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		w.Write(prev)
		return
	}
	i := -1
	for j, p := range f.products {
		if p.SKU == body.SKU {
			i = j
		}
	}
	if i < 0 {
		f.mu.Unlock()
		writeError(w, 404, "unknown_sku", "No product has this SKU; GET /api/products lists them.")
		return
	}
	p := &f.products[i]
	if p.Stock < body.Qty {
		f.mu.Unlock()
		writeError(w, 409, "sold_out", "Not enough stock left for this order.")
		return
	}
	p.Stock -= body.Qty
	f.orders++
	lockName := r.Header.Get("X-Lock-Variant")
	if lockName == "" {
		lockName = "redlock"
	}
	out, _ := json.Marshal(map[string]any{"id": f.orders, "sku": p.SKU, "qty": body.Qty, "user": body.User, "lock": lockName,
		"fence": nil, "total_cents": p.PriceCents * body.Qty, "created_at": time.Now()})
	f.keys[key] = out
	stock := p.Stock
	f.mu.Unlock()
	f.publish(map[string]any{"type": "stock", "sku": body.SKU, "stock": stock})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(201)
	w.Write(out)
}

func (f *fakeAPI) grab(w http.ResponseWriter, r *http.Request) {
	var body struct {
		User string `json:"user"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	if body.User == "" {
		writeError(w, 422, "invalid_user", "Give a user name of 1 to 64 printable characters.")
		return
	}
	f.mu.Lock()
	var s *fakeSeat
	for i := range f.seats {
		if f.seats[i].Seat == r.PathValue("seat") {
			s = &f.seats[i]
		}
	}
	switch {
	case s == nil:
		f.mu.Unlock()
		writeError(w, 404, "unknown_seat", "The event has no such seat; GET its seat map for the labels.")
		return
	case s.Taken:
		f.mu.Unlock()
		writeError(w, 409, "seat_taken", "Someone else has this seat; pick another.")
		return
	}
	s.Taken, s.User, s.Bookings = true, body.User, 1
	f.mu.Unlock()
	f.publish(map[string]any{"type": "seat", "event": "gala", "seat": s.Seat, "user": body.User})
	writeJSON(w, 201, map[string]any{"id": 1, "event": "gala", "seat": s.Seat, "user": body.User, "lock": "redlock", "fence": nil})
}

func (f *fakeAPI) publish(v any) {
	b, _ := json.Marshal(v)
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.subs {
		select {
		case c <- b:
		default:
		}
	}
}

func (f *fakeAPI) stream(w http.ResponseWriter, r *http.Request) {
	c := make(chan []byte, 64)
	f.mu.Lock()
	f.subs[c] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.subs, c)
		f.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	fmt.Fprint(w, ": hello\n\n")
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-c:
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
	}
}

func (f *fakeAPI) startRun(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Variant   string `json:"variant"`
		Scenario  string `json:"scenario"`
		Rate      int    `json:"rate"`
		DurationS int    `json:"duration_s"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Rate < 1 || body.DurationS < 1 {
		writeError(w, 422, "invalid_run", "Give a variant, a scenario, a positive rate and duration_s.")
		return
	}
	f.mu.Lock()
	run := &fakeRun{ID: len(f.runs) + 1, Variant: body.Variant, Scenario: body.Scenario, Rate: body.Rate,
		DurationS: body.DurationS, State: "running", StartedAt: time.Now(), changed: make(chan struct{})}
	f.runs = append(f.runs, run)
	f.mu.Unlock()
	go f.play(run)
	writeJSON(w, 202, map[string]any{"id": run.ID})
}

// play makes up a run: progress in steps, then a cell whose numbers say
// "breaks" for the variants the matrix expects to break under clean
// concurrency, with two overlapping holders on the timeline.
func (f *fakeAPI) play(run *fakeRun) {
	total := run.Rate * run.DurationS
	for i := 1; i <= 4; i++ {
		time.Sleep(150 * time.Millisecond)
		f.emit(run, map[string]any{"type": "progress", "done": total * i / 4, "total": total})
	}
	f.emit(run, map[string]any{"type": "note", "message": "audit: reading the database"})
	breaks := run.Variant == "none"
	seen, oversold := "holds", 0
	var timeline []map[string]any
	for i := range 12 {
		timeline = append(timeline, map[string]any{"owner": fmt.Sprintf("req-%d", i), "token": i + 1,
			"from_ms": i * 80, "to_ms": i*80 + 60})
	}
	if breaks {
		seen, oversold = "breaks", 3
		timeline = append(timeline, map[string]any{"owner": "req-late", "token": 13, "from_ms": 100, "to_ms": 300})
	}
	cell := map[string]any{"variant": run.Variant, "scenario": run.Scenario, "expected": seen, "seen": seen, "ok": true,
		"sold": 20 + oversold, "initial": 20, "oversold_units": oversold, "lost_updates": oversold, "double_booked_seats": 0,
		"stuck_locks": 0, "codes": map[string]int{"201": 20, "409": total - 25, "503": 5, "other": 0},
		"throughput": float64(run.Rate) * 0.98, "p50_ms": 4.2, "p99_ms": 31.5, "timeline": timeline}
	f.mu.Lock()
	run.Cell, run.State = cell, "done"
	f.mu.Unlock()
	f.emit(run, map[string]any{"type": "result", "cell": cell})
}

func (f *fakeAPI) emit(run *fakeRun, v any) {
	b, _ := json.Marshal(v)
	f.mu.Lock()
	defer f.mu.Unlock()
	run.events = append(run.events, b)
	close(run.changed)
	run.changed = make(chan struct{})
}

// runStream replays the run's events so far, then follows it to its result.
func (f *fakeAPI) runStream(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.PathValue("id"))
	f.mu.Lock()
	var run *fakeRun
	for _, x := range f.runs {
		if x.ID == id {
			run = x
		}
	}
	f.mu.Unlock()
	if run == nil {
		writeError(w, 404, "unknown_run", "No run has this id.")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	sent := 0
	for {
		f.mu.Lock()
		events, changed := run.events[sent:], run.changed
		f.mu.Unlock()
		for _, b := range events {
			fmt.Fprintf(w, "data: %s\n\n", b)
			sent++
			if strings.Contains(string(b), `"type":"result"`) {
				fl.Flush()
				return
			}
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		}
	}
}
