package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"flashsale/loadtest/checker"
)

// ChaosConfig configures a chaos run: every selected variant sells side by
// side, each on SKUs and seats of its own, on three app instances and five
// Redis nodes, while a seeded nemesis breaks the world.
type ChaosConfig struct {
	// Variants to run; nil means all.
	Variants []string
	// Faults are the nemesis's fault kinds; nil means FaultKinds.
	Faults []string
	// Duration is how long the clients work and the nemesis strikes.
	// Default 2m.
	Duration time.Duration
	// Seed fixes the nemesis's schedule and the traffic. Default 1.
	Seed uint64
	// Rate is each variant's purchases per second. Default 30.
	Rate int
	// WorkMS is the business work inside every critical section: long
	// enough that the hot lock is always wanted, so a fault that frees it
	// early has a waiter to let in. Default 40.
	WorkMS int
	// LockTTL and LockWait are the instances' lease TTL and wait budget.
	// Defaults 500ms and 1s.
	LockTTL, LockWait time.Duration
	// Batch runs every variant with batching under one lease on (the
	// app's -batch).
	Batch bool
	// Local is the environment; Instances and Nodes default to 3 and 5,
	// and AOF and History are always on.
	Local LocalConfig
	// OutDir receives chaos.json, chaos.html, the histories and the
	// environment. Required.
	OutDir string
	// Logger receives notes as the run goes. Default: discard.
	Logger *slog.Logger
}

func (c *ChaosConfig) defaults() error {
	var err error
	if c.Variants, err = pick(strings.Join(c.Variants, ","), Variants); err != nil {
		return fmt.Errorf("variants: %w", err)
	}
	if c.Faults, err = pick(strings.Join(c.Faults, ","), FaultKinds); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	if c.Duration <= 0 {
		c.Duration = 2 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Rate <= 0 {
		c.Rate = 30
	}
	if c.WorkMS <= 0 {
		c.WorkMS = 40
	}
	if c.LockTTL <= 0 {
		c.LockTTL = 500 * time.Millisecond
	}
	if c.LockWait <= 0 {
		c.LockWait = time.Second
	}
	if c.OutDir == "" {
		return errors.New("a chaos run needs an output directory")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Local.Instances <= 0 {
		c.Local.Instances = 3
	}
	if c.Local.Nodes <= 0 {
		c.Local.Nodes = 5
	}
	if c.Local.Instances < 2 || c.Local.Nodes < 3 {
		return errors.New("a chaos run needs at least 2 app instances and 3 Redis nodes")
	}
	c.Local.AOF, c.Local.History = true, true
	c.Local.LockTTL, c.Local.LockWait = c.LockTTL, c.LockWait
	c.Local.Dir = filepath.Join(c.OutDir, "env")
	if c.Local.Logger == nil {
		c.Local.Logger = c.Logger
	}
	return nil
}

// chaosBreakers are, per variant, the fault kinds that can make it break.
// Whether one does in a given run depends on timing (a pause must catch a
// holder inside its critical section), so a variant expected to break may
// hold in a short run: only -strict fails on that. A variant with no
// breaker among the run's faults must hold, and breaking fails the run.
var chaosBreakers = map[string][]string{
	// Concurrency alone breaks it.
	"none": nil,
	// setnx-expire also leaves a key with no TTL whenever anything lands
	// between SETNX and EXPIRE: a crash, a wait deadline, a reply lost to a
	// paused or cut-off node. Every fault can break it.
	"setnx-expire": FaultKinds,
	"get-del":      {AppPause, ClockJump, NetDelay},
	"plain-del":    {AppPause, ClockJump, NetDelay},
	"lua":          {AppPause, ClockJump, NetDelay},
	// Redlock checks its validity (a late grant is refused) and tolerates
	// a minority of nodes crashed, wiped, paused or cut off; it cannot
	// tell a holder that stopped past its TTL, nor a majority whose clocks
	// jumped.
	"redlock":       {AppPause, ClockJump},
	"lua+fence":     {},
	"redlock+fence": {},
}

// ChaosExpected is what a variant must do under the given fault kinds:
// Holds, or Breaks with the kinds that can break it (none for `none`,
// which breaks on concurrency alone).
func ChaosExpected(variant string, kinds []string) (Outcome, []string) {
	breakers, ok := chaosBreakers[variant]
	if !ok {
		return NoClaim, nil
	}
	if breakers == nil {
		return Breaks, nil
	}
	var by []string
	for _, k := range kinds {
		if slices.Contains(breakers, k) {
			by = append(by, k)
		}
	}
	if len(by) == 0 {
		return Holds, nil
	}
	return Breaks, by
}

// ChaosReport is the outcome of a chaos run: chaos.json.
type ChaosReport struct {
	Seed      uint64                   `json:"seed"`
	Duration  string                   `json:"duration"`
	Faults    []string                 `json:"faults"`
	Instances int                      `json:"instances"`
	Nodes     int                      `json:"nodes"`
	LockTTL   string                   `json:"lock_ttl"`
	Variants  map[string]*ChaosVariant `json:"variants"`
	Schedule  []NemesisEvent           `json:"schedule"`
	Nemesis   []NemesisRecord          `json:"nemesis"`
	Command   string                   `json:"command,omitempty"`
	Started   time.Time                `json:"started"`
	// RunStart is when the clients and the nemesis began: the timeline's 0.
	RunStart time.Time `json:"run_start"`
	Finished time.Time `json:"finished"`
	Notes    []string  `json:"notes,omitempty"`
	// StuckLockKeys are the lock keys the runner found without a TTL.
	StuckLockKeys []string                  `json:"stuck_lock_keys,omitempty"`
	holders       map[string][]checker.Span // per variant, its hot key's leases
	order         []string
}

// ChaosVariant is one variant's verdict.
type ChaosVariant struct {
	Verdict  string  `json:"verdict"`
	Expected Outcome `json:"expected"`
	// ExpectedBreakers are the run's fault kinds that can break it.
	ExpectedBreakers       []string `json:"expected_breakers,omitempty"`
	OK                     bool     `json:"ok"`
	LockOverlaps           int64    `json:"lock_overlaps"`
	StaleWrites            int64    `json:"stale_writes"`
	OversoldUnits          int64    `json:"oversold_units"`
	LostUpdates            int64    `json:"lost_updates"`
	DoubleBookedSeats      int64    `json:"double_booked_seats"`
	StuckLocks             int64    `json:"stuck_locks"`
	LostAcknowledgedOrders int64    `json:"lost_acknowledged_orders"`
	// TokenInversions are fenced leases back from their acquire with a
	// lower token than one granted meanwhile (refused by the store).
	TokenInversions int64 `json:"token_inversions"`
	// NemesisEvents counts the faults of the run, by kind: every variant
	// met all of them.
	NemesisEvents map[string]int `json:"nemesis_events"`
	// Requests and Answers are the client's side: answers by status, 0
	// for none.
	Requests int            `json:"requests"`
	Answers  map[string]int `json:"answers"`
	// Leases, Orders and Bookings are how much the verdict rests on.
	Leases         int                 `json:"leases"`
	Orders         int64               `json:"orders"`
	Bookings       int64               `json:"bookings"`
	FirstViolation *checker.Violation  `json:"first_violation,omitempty"`
	Violations     []checker.Violation `json:"violations,omitempty"`
	Scope          checker.Scope       `json:"scope"`
}

// Failed reports whether a variant that must hold broke, or, with strict,
// a variant expected to break held.
func (r *ChaosReport) Failed(strict bool) bool {
	for _, v := range r.Variants {
		if !v.OK && (v.Expected == Holds || strict) {
			return true
		}
	}
	return false
}

// RunChaos starts the environment, runs the clients and the nemesis for
// the configured duration, heals everything, and judges every variant
// with the checker. It fails only when it could not run.
func RunChaos(ctx context.Context, cfg ChaosConfig) (*ChaosReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	rep := &ChaosReport{
		Seed: cfg.Seed, Duration: cfg.Duration.String(), Faults: cfg.Faults, Instances: cfg.Local.Instances,
		Nodes: cfg.Local.Nodes, LockTTL: cfg.LockTTL.String(), Variants: map[string]*ChaosVariant{},
		Started: time.Now(), order: cfg.Variants,
	}
	if cfg.Batch {
		rep.Notes = append(rep.Notes, "-batch: orders batched under one lease on every instance")
	}
	local, err := StartLocal(ctx, cfg.Local)
	if err != nil {
		return nil, err
	}
	defer func() {
		if local != nil {
			_ = local.Close()
		}
	}()
	apis := (&env{bases: local.Bases(), token: local.Token()}).apis()

	// A sale with SKUs and seats for each variant.
	setup, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cat := Catalogue{Seats: min(1000, 120*len(cfg.Variants))}
	scarce := max(20, cfg.Rate*int(cfg.Duration.Seconds())/40)
	for _, v := range cfg.Variants {
		f := fileName(v)
		cat.Products = append(cat.Products,
			Product{SKU: "hot-" + f, Name: "Hot " + v, PriceCents: 999, Stock: 1_000_000},
			Product{SKU: "scarce-" + f, Name: "Scarce " + v, PriceCents: 4999, Stock: int64(scarce)})
	}
	state, err := resetSale(setup, apis[0], cat)
	if err != nil {
		return nil, err
	}
	seats, err := apis[0].Seats(setup, state.Event)
	if err != nil {
		return nil, err
	}
	per := len(seats) / len(cfg.Variants)
	scopes := map[string]checker.Scope{}
	for i, v := range cfg.Variants {
		f := fileName(v)
		scopes[v] = checker.Scope{Variant: v, SKUs: []string{"hot-" + f, "scarce-" + f}, Event: state.Event, Seats: seats[i*per : (i+1)*per]}
	}
	plan := FaultPlan{Seed: cfg.Seed, WorkMS: cfg.WorkMS, Batch: &cfg.Batch}
	if err := forAll(setup, apis, func(ctx context.Context, a API) error { return a.SetFaults(ctx, plan) }); err != nil {
		return nil, err
	}

	// The clients and the nemesis, side by side.
	clientLog, err := os.Create(filepath.Join(cfg.OutDir, "client.jsonl"))
	if err != nil {
		return nil, err
	}
	nlog, err := openNemesisLog(filepath.Join(cfg.OutDir, "nemesis.jsonl"))
	if err != nil {
		clientLog.Close()
		return nil, err
	}
	rep.Schedule = Schedule(cfg.Seed, cfg.Duration, cfg.LockTTL, cfg.Faults, cfg.Local.Instances, cfg.Local.Nodes)
	cl := &chaosClients{bases: local.Bases(), out: clientLog, counts: map[string]map[string]int{}, requests: map[string]*atomic.Int64{}}
	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	start := time.Now()
	rep.RunStart = start
	var wg sync.WaitGroup
	wg.Go(func() {
		(&nemesis{local: local, plan: plan, pattern: DefaultLockPattern, log: nlog, logger: cfg.Logger}).run(runCtx, start, rep.Schedule)
	})
	for _, v := range cfg.Variants {
		cl.requests[v] = &atomic.Int64{}
	}
	for i, v := range cfg.Variants {
		sc := scopes[v]
		wg.Go(func() { cl.buy(runCtx, v, sc.SKUs, cfg.Rate, cfg.Seed+uint64(i)) })
		wg.Go(func() { cl.grab(runCtx, v, sc.Event, sc.Seats, cfg.Duration) })
	}
	wg.Wait()
	cfg.Logger.Info("clients and nemesis done; healing", "elapsed", time.Since(start).Round(time.Second))

	// Heal everything, let every lease run out, and look for stuck locks.
	after, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	heal := []error{local.Nodes().Heal(after), local.Network().Heal(after)}
	for i := range cfg.Local.Instances {
		if local.Running(i) {
			heal = append(heal, local.ResumeApp(i))
		} else {
			heal = append(heal, local.RestartApp(after, i))
		}
	}
	if err := errors.Join(heal...); err != nil {
		rep.Notes = append(rep.Notes, "healing after the run: "+err.Error())
	}
	sleep(after, 3*cfg.LockTTL)
	stuck, err := ScanStuckLocks(after, local.RedisURLs(), DefaultLockPattern)
	if err != nil {
		rep.Notes = append(rep.Notes, "stuck-lock scan: "+err.Error())
	}
	var stuckKeys []string
	for _, s := range stuck {
		stuckKeys = append(stuckKeys, s.Key)
	}
	closeErr := local.Close() // the instances stop: their histories are complete
	local = nil
	if err := errors.Join(closeErr, clientLog.Close(), nlog.close()); err != nil {
		rep.Notes = append(rep.Notes, "closing: "+err.Error())
	}

	rep.Nemesis, rep.StuckLockKeys = nlog.events, stuckKeys
	for _, v := range cfg.Variants {
		exp, by := ChaosExpected(v, cfg.Faults)
		rep.Variants[v] = &ChaosVariant{
			Expected: exp, ExpectedBreakers: by, NemesisEvents: nlog.counts,
			Requests: int(cl.requests[v].Load()), Answers: cl.counts[v], Scope: scopes[v],
		}
	}
	if err := rep.judge(ctx, cfg.OutDir); err != nil {
		return nil, err
	}
	rep.Finished = time.Now()
	return rep, nil
}

// judge runs the checker on a run's directory — the instances' histories,
// the client's and the nemesis's logs, the database — and fills in every
// variant's verdict.
func (r *ChaosReport) judge(ctx context.Context, dir string) error {
	histories, err := filepath.Glob(filepath.Join(dir, "env", "history-app*.jsonl"))
	if err != nil {
		return err
	}
	recs, err := checker.ReadFiles(append(histories, filepath.Join(dir, "client.jsonl"), filepath.Join(dir, "nemesis.jsonl"))...)
	if err != nil {
		return err
	}
	db, err := checker.OpenSQLite(filepath.Join(dir, "env", "sale.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	var in []checker.Scope
	for _, v := range r.order {
		in = append(in, r.Variants[v].Scope)
	}
	results, err := checker.Check(ctx, checker.Input{Records: recs, DB: db, Scopes: in, StuckLockKeys: r.StuckLockKeys})
	if err != nil {
		return err
	}
	r.holders = map[string][]checker.Span{}
	for _, res := range results {
		cv := r.Variants[res.Variant]
		cv.Verdict = res.Verdict
		cv.LockOverlaps, cv.StaleWrites, cv.OversoldUnits, cv.LostUpdates = res.LockOverlaps, res.StaleWrites, res.OversoldUnits, res.LostUpdates
		cv.DoubleBookedSeats, cv.StuckLocks, cv.LostAcknowledgedOrders = res.DoubleBookedSeats, res.StuckLocks, res.LostAcknowledgedOrders
		cv.TokenInversions, cv.Leases, cv.Orders, cv.Bookings = res.TokenInversions, res.Leases, res.Orders, res.Bookings
		cv.FirstViolation, cv.Violations = res.FirstViolation, res.Violations
		cv.OK = cv.Expected == NoClaim || string(cv.Expected) == res.Verdict
		r.holders[res.Variant] = checker.Holders(recs, res.Variant, "sku:"+cv.Scope.SKUs[0])
	}
	return nil
}

// RecheckChaos judges a kept chaos run again from its directory (its
// chaos.json, histories and database), with the checker as it is now.
func RecheckChaos(ctx context.Context, dir string) (*ChaosReport, error) {
	b, err := os.ReadFile(filepath.Join(dir, "chaos.json"))
	if err != nil {
		return nil, err
	}
	var r ChaosReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	for _, v := range Variants {
		if r.Variants[v] != nil {
			r.order = append(r.order, v)
		}
	}
	if err := r.judge(ctx, dir); err != nil {
		return nil, err
	}
	return &r, nil
}

// chaosClients are the shoppers of a chaos run. Every answer is recorded
// in client.jsonl as the client saw it, for the checker's durability
// check: a 201 is a promise the database must keep.
type chaosClients struct {
	bases []string
	n     atomic.Uint64 // requests sent, for round-robin and unique keys

	mu       sync.Mutex
	out      io.Writer
	counts   map[string]map[string]int // variant → status → answers
	requests map[string]*atomic.Int64
}

// clientTimeout bounds one request: longer than any pause the nemesis
// makes, so a paused instance's answer is still waited for.
const clientTimeout = 15 * time.Second

var chaosHTTP = &http.Client{
	Timeout:   clientTimeout,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
}

// maxInFlight bounds each variant's open requests: when an instance is
// paused its requests pile up, and the next ones are skipped, not queued.
const maxInFlight = 48

// buy sends rate purchases a second until ctx ends: nine in ten of the
// variant's hot SKU, the rest of its scarce one.
func (c *chaosClients) buy(ctx context.Context, variant string, skus []string, rate int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	slots := make(chan struct{}, maxInFlight)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sku := skus[0]
		if rng.IntN(10) == 0 {
			sku = skus[1]
		}
		select {
		case slots <- struct{}{}:
		default:
			continue // an instance is stuck; do not pile up
		}
		wg.Go(func() {
			defer func() { <-slots }()
			c.send(variant, "order", "/api/orders", map[string]any{"sku": sku, "qty": 1})
		})
	}
}

// grab walks the variant's seats over the run: every seat in turn gets
// three grabs at once, one from each instance, so a broken lock has a
// real race to lose.
func (c *chaosClients) grab(ctx context.Context, variant, event string, seats []string, d time.Duration) {
	if len(seats) == 0 {
		return
	}
	every := d / time.Duration(len(seats))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, seat := range seats {
		for range len(c.bases) {
			wg.Go(func() { c.send(variant, "seat", "/api/events/"+event+"/seats/"+seat, map[string]any{}) })
		}
		if !sleep(ctx, every) {
			return
		}
	}
}

// send makes one request on the next instance and records its answer.
// The request's context is not the run's: a request sent is waited for,
// so its answer is known.
func (c *chaosClients) send(variant, op, path string, body map[string]any) {
	n := c.n.Add(1)
	c.requests[variant].Add(1)
	key := fmt.Sprintf("chaos-%d", n)
	body["user"] = fmt.Sprintf("u%d", n)
	b, _ := json.Marshal(body) // strings and numbers always encode
	base := c.bases[int(n)%len(c.bases)]
	status := 0
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Lock-Variant", variant)
		req.Header.Set("Idempotency-Key", key)
		var res *http.Response
		if res, err = chaosHTTP.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
			res.Body.Close()
			status = res.StatusCode
		}
	}
	line, _ := json.Marshal(checker.Record{Time: time.Now(), Kind: "ack", Op: op, Variant: variant, Status: status, IdempotencyKey: key})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts[variant] == nil {
		c.counts[variant] = map[string]int{}
	}
	c.counts[variant][fmt.Sprint(status)]++
	_, _ = c.out.Write(append(line, '\n')) // a lost line shows as a missing ack, never a false one
}
