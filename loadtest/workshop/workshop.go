// Package workshop runs the workshop page's cells: one load-runner cell at a
// time against the very instance that serves the page, with its progress and
// notes as a stream of events and, in the result, a timeline of who held the
// hot SKU's lock when. The server reaches it through the small interface
// handlers.WorkshopRunner; main wires this package in, so the HTTP layer
// links neither the load runner nor vegeta.
package workshop

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"flashsale/internal/locktap"
	"flashsale/loadtest"
)

// event is one message on a run's stream, encoded as JSON.
type event = map[string]any

// Runner runs one load-runner cell at a time against this very instance
// (its own database and Redis nodes), for the workshop page: progress and
// notes stream while it runs, and the result keeps a timeline of who held
// the hot SKU's lock when, recorded from the lock package's own events.
type Runner struct {
	log       *slog.Logger
	token     string
	redisURLs []string
	ttl       time.Duration

	mu      sync.Mutex
	appBin  string // the storefront binary, when the sequence may start its own environment
	base    string // this instance's URL, known once it listens
	runs    []*workshopRun
	current *workshopRun // the run recording lock events, if any
}

// NewRunner prepares the workshop runner. redisURLs are this instance's
// nodes, for the runner's own scan for stuck locks; ttl is the instance's
// lease time to live.
func NewRunner(adminToken string, redisURLs []string, ttl time.Duration, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.Default()
	}
	return &Runner{log: log, token: adminToken, redisURLs: redisURLs, ttl: ttl}
}

// SetBase tells the workshop where this instance listens.
func (w *Runner) SetBase(url string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.base = url
}

// Observe records lock events for the running cell's timeline. It is chained
// into locktap.Tap.Observer and never blocks for long.
func (w *Runner) Observe(e locktap.Event) {
	w.mu.Lock()
	r := w.current
	w.mu.Unlock()
	if r != nil {
		r.observe(e)
	}
}

// workshopRun is one cell run from the page. Its events are kept so a late
// subscriber gets the whole story.
type workshopRun struct {
	ID        string    `json:"id"`
	Variant   string    `json:"variant"`
	Scenario  string    `json:"scenario"`
	Rate      int       `json:"rate"`
	Duration  int       `json:"duration_s"`
	Watchdog  bool      `json:"watchdog"`
	Fast      bool      `json:"fast"`
	State     string    `json:"state"` // running, done, failed
	StartedAt time.Time `json:"started_at"`
	Cell      *runCell  `json:"cell,omitempty"`
	Error     string    `json:"error,omitempty"`
	// Kind is "sequence" for a run of the labs' sequence (sequence.go),
	// whose cells are its Steps; "" for one cell.
	Kind  string     `json:"kind,omitempty"`
	Steps []*seqStep `json:"steps,omitempty"`

	mu      sync.Mutex
	events  []event
	changed chan struct{} // closed and replaced on every new event
	holds   map[string]*hold
	spans   []*hold
	hotKey  string
}

// hold is one lease of the hot SKU's lock, from grant to release.
type hold struct {
	Owner string   `json:"owner"`
	Token uint64   `json:"token"`
	From  float64  `json:"from_ms"`
	To    *float64 `json:"to_ms"` // nil: never released (crashed or stuck)
}

// maxHolds bounds a timeline; a workshop run is seconds long.
const maxHolds = 5000

func (r *workshopRun) observe(e locktap.Event) {
	if e.Key != r.hotKey || e.Lease == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	at := float64(e.Time.Sub(r.StartedAt).Microseconds()) / 1000
	switch e.Kind {
	case locktap.Acquired:
		if len(r.spans) >= maxHolds {
			return
		}
		token, _ := e.Lease.Token()
		h := &hold{Owner: e.Lease.Owner()[:8], Token: token, From: at}
		r.holds[e.Lease.Owner()] = h
		r.spans = append(r.spans, h)
	case locktap.Released, locktap.Lost:
		if h := r.holds[e.Lease.Owner()]; h != nil && h.To == nil {
			h.To = &at
		}
	}
}

func (r *workshopRun) emit(ev event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	close(r.changed)
	r.changed = make(chan struct{})
}

// since returns the events from i on, the channel the next one closes, and
// whether the run is over.
func (r *workshopRun) since(i int) ([]any, <-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := make([]any, 0, len(r.events)-min(i, len(r.events)))
	for _, ev := range r.events[min(i, len(r.events)):] {
		evs = append(evs, ev)
	}
	return evs, r.changed, r.State != "running"
}

// runCell is the load runner's cell in the shape the workshop page draws.
type runCell struct {
	Variant           string         `json:"variant"`
	Scenario          string         `json:"scenario"`
	Expected          string         `json:"expected"`
	Seen              string         `json:"seen"`
	OK                bool           `json:"ok"`
	Sold              int64          `json:"sold"`
	Initial           int64          `json:"initial"`
	OversoldUnits     int64          `json:"oversold_units"`
	LostUpdates       int64          `json:"lost_updates"`
	DoubleBookedSeats int64          `json:"double_booked_seats"`
	StuckLocks        int            `json:"stuck_locks"`
	Codes             map[string]int `json:"codes"`
	Throughput        float64        `json:"throughput"`
	P50               float64        `json:"p50_ms"`
	P99               float64        `json:"p99_ms"`
	Reasons           []string       `json:"reasons,omitempty"`
	Notes             []string       `json:"notes,omitempty"`
	Timeline          []*hold        `json:"timeline"`
	TimelineKey       string         `json:"timeline_key"`
	// Linearizable is porcupine's verdict on the history the run's
	// shoppers saw (null: its check ran out of time); HistoryHTML is its
	// picture, a page of its own, when it is not linearizable.
	Linearizable *bool  `json:"linearizable"`
	HistoryHTML  string `json:"history_html,omitempty"`
}

// Scenarios are the fault scenarios a run may name.
func (w *Runner) Scenarios() []string { return loadtest.ScenarioNames() }

// Start begins a run of variant under scenario at rate requests per second
// for durationS seconds, with the lease watchdog on in every cell when
// watchdog is set (loadtest.Config.Watchdog) and the locks' speed layer off
// unless fast is set (loadtest.Config.Taught), and returns its id. started is false, and nothing
// runs, while another run is in progress: a run resets the sale, so two at
// once would spoil both. The caller has checked the arguments.
func (w *Runner) Start(variant, scenario string, rate, durationS int, watchdog, fast bool) (id string, started bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ok, err := w.idle(); !ok {
		return "", false, err
	}
	hot := loadtest.CellCatalogue().Products[0].SKU
	r := &workshopRun{
		ID: strconv.Itoa(len(w.runs) + 1), Variant: variant, Scenario: scenario,
		Rate: rate, Duration: durationS, Watchdog: watchdog, Fast: fast, State: "running", StartedAt: time.Now(),
		changed: make(chan struct{}), holds: map[string]*hold{}, hotKey: "sku:" + hot,
	}
	w.begin(r)
	go w.run(r, w.base, hot)
	return r.ID, true, nil
}

// idle reports whether a run may start now: not while another is in
// progress (ok false, no error), nor before the instance listens. The caller
// holds w.mu.
func (w *Runner) idle() (ok bool, err error) {
	if w.current != nil {
		return false, nil
	}
	if w.base == "" {
		return false, errors.New("workshop: the instance's address is not known yet")
	}
	return true, nil
}

// begin records r as the run in progress. The caller holds w.mu.
func (w *Runner) begin(r *workshopRun) {
	w.runs = append(w.runs, r)
	w.current = r
}

// Runs are the records of every run, oldest first, as the page reads them.
func (w *Runner) Runs() []any {
	w.mu.Lock()
	runs := slices.Clone(w.runs)
	w.mu.Unlock()
	out := make([]any, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.record())
	}
	return out
}

// Run is the record of the run with this id; ok is false when there is none.
func (w *Runner) Run(id string) (record any, ok bool) {
	if r := w.find(id); r != nil {
		return r.record(), true
	}
	return nil, false
}

// Events are the run's events from the from-th on, a channel closed when the
// next one comes, and whether the run is over (then nothing follows). An
// unknown id has no events and is over.
func (w *Runner) Events(id string, from int) (events []any, next <-chan struct{}, over bool) {
	r := w.find(id)
	if r == nil {
		return nil, nil, true
	}
	return r.since(from)
}

func (w *Runner) find(id string) *workshopRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.runs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

func (w *Runner) run(r *workshopRun, base, hot string) {
	defer func() {
		w.mu.Lock()
		w.current = nil
		w.mu.Unlock()
	}()
	total := r.Rate * r.Duration
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.Duration)*time.Second+2*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { // progress by the clock: the attack paces itself at Rate
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sent := min(total, int(time.Since(r.StartedAt).Seconds()*float64(r.Rate)))
				r.emit(event{"type": "progress", "done": sent, "total": total})
			}
		}
	}()
	cell, picture, err := runOne(ctx, loadtest.Config{
		Variants: []string{r.Variant}, Scenarios: []string{r.Scenario},
		Rate: r.Rate, Duration: time.Duration(r.Duration) * time.Second,
		Seed: 1, LockTTL: w.ttl, Watchdog: r.Watchdog, Taught: !r.Fast, WarmUp: -1,
		Targets: []string{base}, AdminToken: w.token, RedisURLs: w.redisURLs,
		Logger: slog.New(&noteHandler{run: r}),
	}, r.Variant, r.judgedAs())
	close(done)
	r.mu.Lock()
	if err != nil {
		r.State, r.Error = "failed", err.Error()
	} else {
		r.State = "done"
		r.Cell = toRunCell(cell, r.spans, r.hotKey)
		r.Cell.HistoryHTML = picture
	}
	result := event{"type": "result", "cell": r.Cell}
	if err != nil {
		result = event{"type": "error", "message": r.Error}
	}
	r.mu.Unlock()
	if err != nil {
		w.log.Warn("workshop run failed", "id", r.ID, "variant", r.Variant, "scenario", r.Scenario, "err", err)
	}
	r.emit(event{"type": "progress", "done": total, "total": total})
	r.emit(result)
}

// judgedAs is the column the load runner ran the run's cell as: with the
// watchdog on, long-work is long-work-watchdog.
func (r *workshopRun) judgedAs() string {
	if r.Watchdog {
		return loadtest.WatchdogTwin(r.Scenario)
	}
	return r.Scenario
}

func toRunCell(c *loadtest.Cell, spans []*hold, key string) *runCell {
	// Sold / initial of the hot SKU, where overselling shows; the bulk
	// products' large stock would hide it in a sum.
	sold, initial := c.Audit.SoldUnits, c.Initial
	for _, p := range c.Audit.Products {
		if p.SKU == c.HotSKU {
			sold, initial = p.SoldUnits, p.InitialStock
		}
	}
	return &runCell{
		Variant: c.Variant, Scenario: c.Scenario, Expected: string(c.Expected), Seen: string(c.Seen),
		OK: c.Verdict == loadtest.VerdictOK, Sold: sold, Initial: initial,
		OversoldUnits: c.Audit.OversoldUnits, LostUpdates: c.Audit.LostUpdates,
		DoubleBookedSeats: c.Audit.DoubleBookedSeats, StuckLocks: c.StuckLocks,
		Codes: map[string]int{
			"201": c.Summary.Counts.Created, "409": c.Summary.Counts.Conflict,
			"503": c.Summary.Counts.Unavailable, "other": c.Summary.Counts.Other,
		},
		Throughput: c.Summary.SalesPerSecond,
		P50:        float64(c.Summary.P50.Microseconds()) / 1000, P99: float64(c.Summary.P99.Microseconds()) / 1000,
		Reasons: c.Reasons, Notes: c.Notes,
		Timeline: slices.Clone(spans), TimelineKey: key,
		Linearizable: c.Linearizable,
	}
}

func (r *workshopRun) record() event {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := event{"id": r.ID, "variant": r.Variant, "scenario": r.Scenario, "rate": r.Rate,
		"duration_s": r.Duration, "watchdog": r.Watchdog, "fast": r.Fast, "state": r.State, "started_at": r.StartedAt}
	if r.Cell != nil {
		rec["cell"] = r.Cell
	}
	if r.Error != "" {
		rec["error"] = r.Error
	}
	if r.Kind != "" {
		rec["kind"], rec["steps"] = r.Kind, r.stepsNow()
	}
	return rec
}
