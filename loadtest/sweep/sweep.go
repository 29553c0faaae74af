// Package sweep measures what a lock costs on one hot key: every variant at
// rising offered rates on a fresh sale, the completed sales per second, the
// 503s, the p99 latency and the lease hold time, in a text, JSON and HTML
// report with two standalone SVG charts.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/curriculum"
	"flashsale/internal/cli"
	"flashsale/internal/machine"
	"flashsale/inventory"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/output"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// Variants are the sweep's default rows: none is the ceiling of
// everything but the lock (HTTP, the app, SQLite), lua, redlock and
// redlock+fence what a correct lock costs on one hot key, redsync what the
// Go library people install instead costs on the same nodes, and the three
// designs without a lock (db-guard, db-for-update, redis-stock) what the
// same sale costs when the store is the guard.
var Variants = []string{ladder.None, lock.Lua, lock.Redlock, lock.RedlockFence, ladder.Redsync, inventory.DBGuard, inventory.DBForUpdate, inventory.RedisStock}

// Rates are the sweep's default offered rates, rising past the point
// where one hot key saturates.
var Rates = []int{200, 500, 1000}

// Config configures Sweep. The zero value of every field means its
// default.
type Config struct {
	// Variants are the lock variants swept, in order. Default Variants.
	Variants []string
	// Rates are the offered rates, requests per second, in order. Default
	// Rates.
	Rates []int
	// Duration is how long each rate is offered. Default 5s.
	Duration time.Duration
	// WorkMS is the business work inside every critical section. Default 1;
	// negative for none.
	WorkMS int
	// MaxWorkers caps the requests in flight. Default: enough for the rate
	// to be kept while every request waits its whole lock-wait budget, so
	// the offered rate is the rate sent even past saturation.
	MaxWorkers uint64
	// Seed fixes the traffic. Default 1.
	Seed uint64
	// Stock is the hot SKU's stock: it must never run out, or sold_out
	// answers would stand in for the lock's throughput. Default 10 million.
	Stock int64
	// Batch runs every step with batching under one lease on (the app's
	// -batch); off, it is off in every step.
	Batch bool
	// Local is the environment started for the sweep: 3 instances and 5
	// nodes by default, one SQLite file unless Local.DB names PostgreSQL.
	// LockWait defaults to 1s.
	Local cluster.LocalConfig
	// WarmUp is the unrecorded attack over every variant before the first
	// step. Default 1s; negative for none.
	WarmUp time.Duration
	// OutDir receives vegeta's binary results of every step, under
	// results/sweep/<variant>@<rate>.bin; "" writes none.
	OutDir string
	// Progress receives a progress bar per step; nil shows none.
	Progress io.Writer
	// Logger receives notes as the sweep goes. Default: discard.
	Logger *slog.Logger
	// SLO is the target a step must meet to count as a variant's capacity.
	// Default traffic.DefaultSLO.
	SLO *traffic.SLO

	// nodeURLs are the Redis nodes whose CPU each step measures, once
	// the environment is up.
	nodeURLs []string
}

// hotSKU is the one product of the sweep's sale.
const hotSKU = "hot"

func (c *Config) defaults() error {
	var err error
	if c.Variants, err = cli.Pick(strings.Join(c.Variants, ","), curriculum.Names()); err != nil {
		return fmt.Errorf("variants: %w", err)
	}
	if len(c.Rates) == 0 {
		c.Rates = slices.Clone(Rates)
	}
	for _, r := range c.Rates {
		if r <= 0 {
			return fmt.Errorf("rates must be positive, got %d", r)
		}
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Duration < 0 {
		return errors.New("duration must be positive")
	}
	switch {
	case c.WorkMS == 0:
		c.WorkMS = 1
	case c.WorkMS < 0:
		c.WorkMS = 0
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Stock == 0 {
		c.Stock = 10_000_000
	}
	if c.Local.LockWait == 0 {
		c.Local.LockWait = time.Second
	}
	if c.Local.LockTTL == 0 {
		c.Local.LockTTL = 500 * time.Millisecond
	}
	if c.WarmUp == 0 {
		c.WarmUp = time.Second
	}
	if c.SLO == nil {
		c.SLO = &traffic.DefaultSLO
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Local.Logger == nil {
		c.Local.Logger = c.Logger
	}
	return nil
}

// workers is the cap on requests in flight at rate: every request of the
// last lock-wait budget and a half may still be waiting.
func (c *Config) workers(rate int) uint64 {
	if c.MaxWorkers > 0 {
		return c.MaxWorkers
	}
	return uint64(float64(rate)*(c.Local.LockWait.Seconds()+0.5)) + 64
}

// catalogue is the sweep's sale: one hot SKU that never sells out, no seats.
func (c *Config) catalogue() storefront.Catalogue {
	return storefront.Catalogue{Products: []storefront.Product{{SKU: hotSKU, Name: "Hot drop", PriceCents: 4999, Stock: c.Stock}}}
}

// Step is one variant at one offered rate.
type Step struct {
	Variant string `json:"variant"`
	// Rate is the offered rate, requests per second.
	Rate    int             `json:"rate"`
	Summary traffic.Summary `json:"vegeta"`
	// Sales is Summary.SalesPerSecond: distinct 201s per second of the send
	// window.
	Sales float64 `json:"sales_per_second"`
	// Unavailable is the share of requests answered 503, in percent.
	Unavailable float64 `json:"percent_503"`
	// Late is the requests answered later than the lock wait plus
	// LateMargin, or not at all in that time.
	Late int `json:"late"`
	// Hold is the mean time a lease was held during the step (grant to
	// release, from the instances' metrics): the critical section with its
	// database reads and writes. One hot key cannot sell faster than
	// 1/Hold (HoldCeiling) whatever the lock, so where the sales meet it,
	// the section is the limit, not the hand-off.
	Hold        time.Duration `json:"hold_ns,omitempty"`
	HoldCeiling float64       `json:"hold_ceiling_per_second,omitempty"`
	// Leases is the leases granted per second of the send window: with
	// batching, Sales / Leases is how many orders one lease sold.
	Leases float64 `json:"leases_per_second,omitempty"`
	// Tries is the acquire tries per lease granted, those of the acquires
	// that gave up included: above 1, processes tried while the lock was
	// held, or split a Redlock vote.
	Tries float64 `json:"tries_per_lease,omitempty"`
	// Cores is the CPU the instances and the runner used during the
	// attack (cores.go); nil where it could not be read.
	Cores *Cores `json:"cpu_cores,omitempty"`
	// LostUpdates is the audit's count after the step: none loses updates,
	// a correct lock must not.
	LostUpdates int64 `json:"lost_updates"`
	// CrossCheck lists every disagreement between the audit and vegeta.
	CrossCheck []string `json:"cross_check,omitempty"`
	// Err is why the step could not run or be read, if it could not.
	Err string `json:"error,omitempty"`
	// ResultsFile is the step's vegeta results, when the sweep kept them.
	ResultsFile string `json:"results_file,omitempty"`
}

// Report is a whole sweep.
type Report struct {
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Command  string        `json:"command,omitempty"`
	Variants []string      `json:"variants"`
	Rates    []int         `json:"rates"`
	Duration time.Duration `json:"duration_ns"`
	WorkMS   int           `json:"work_ms"`
	Seed     uint64        `json:"seed"`
	LockTTL  time.Duration `json:"lock_ttl_ns"`
	LockWait time.Duration `json:"lock_wait_ns"`
	// Instances and Nodes are the app instances and Redis nodes attacked.
	Instances int `json:"instances"`
	Nodes     int `json:"redis_nodes"`
	// Database is "SQLite" or "PostgreSQL"; Batch whether the orders were
	// batched under one lease.
	Database string `json:"database"`
	Batch    bool   `json:"batch,omitempty"`
	// machine.Load says how busy the machine was: the figures are only as
	// quiet as it was.
	machine.Load
	Steps []Step `json:"steps"`
	// Bare are the bare exchanges at every rate (bare.go), offered first
	// when the rates rise and fall again.
	Bare []Step `json:"bare,omitempty"`
	// Spikes are the variants' spikes when the rates rise and fall again
	// (spike.go).
	Spikes []Spike `json:"spikes,omitempty"`
	// SLO is the target of the capacity figures; Capacity each variant's
	// figure against it (capacity.go).
	SLO      traffic.SLO `json:"slo"`
	Capacity []Capacity  `json:"capacity,omitempty"`
	// LatencyNote says what the latencies leave out (coordinated omission).
	LatencyNote string `json:"latency_note"`
}

// Step returns the step of variant at rate, or nil.
func (r *Report) Step(variant string, rate int) *Step {
	for i := range r.Steps {
		if r.Steps[i].Variant == variant && r.Steps[i].Rate == rate {
			return &r.Steps[i]
		}
	}
	return nil
}

// Sweep offers rising rates of purchases of one hot SKU to every variant in
// turn, on a local environment it starts (3 app instances, 5 Redis nodes,
// one SQLite file), and reports the sales per second, the 503s and the p99
// latency of every step. A step that fails is in the report with its error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{
		Started: time.Now(), Variants: cfg.Variants, Rates: cfg.Rates, Duration: cfg.Duration, WorkMS: cfg.WorkMS, Seed: cfg.Seed,
		LockTTL: cfg.Local.LockTTL, LockWait: cfg.Local.LockWait, Load: machine.Before(),
		Database: "SQLite", Batch: cfg.Batch, LatencyNote: cfg.latencyNote(), SLO: *cfg.SLO,
	}
	if strings.HasPrefix(cfg.Local.DB, "postgres") {
		rep.Database = "PostgreSQL"
	}
	local, err := cluster.StartLocal(ctx, cfg.Local)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := local.Close(); err != nil {
			cfg.Logger.Warn("stopping the local environment", "err", err)
		}
	}()
	fleet := storefront.NewFleet(local.Bases(), local.Token())
	cfg.nodeURLs = local.RedisURLs()
	rep.Instances, rep.Nodes = len(fleet), len(local.RedisURLs())
	cat := cfg.catalogue()
	mix := traffic.Mix{HotSKU: hotSKU, HotShare: 1}

	if cfg.WarmUp > 0 {
		warm := traffic.WarmUp{Variants: cfg.Variants, Rate: cfg.Rates[0], Duration: cfg.WarmUp, MaxWorkers: cfg.workers(cfg.Rates[0]),
			Seed: cfg.Seed, Catalogue: cat, Mix: mix}
		if err := warm.Run(ctx, fleet); err != nil {
			return nil, err
		}
	}
	total := len(cfg.Variants) * len(cfg.Rates)
	if peak(cfg.Rates) > 0 {
		total += len(cfg.Rates)
		for _, rate := range cfg.Rates {
			st := bareStep(ctx, cfg, fleet, rate, len(rep.Bare)+1, total)
			cfg.Logger.Info("sweep step", "variant", Bare, "rate", rate, "late", st.Late, "p99", st.Summary.P99, "err", st.Err)
			rep.Bare = append(rep.Bare, st)
		}
	}
	for _, v := range cfg.Variants {
		for _, rate := range cfg.Rates {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			st := runStep(ctx, cfg, fleet, cat, mix, v, v, rate, len(rep.Bare)+len(rep.Steps)+1, total)
			cfg.Logger.Info("sweep step", "variant", v, "rate", rate, "sales_per_second", st.Sales, "percent_503", st.Unavailable, "p99", st.Summary.P99, "err", st.Err)
			rep.Steps = append(rep.Steps, st)
		}
	}
	rep.Finished = time.Now()
	rep.Done()
	rep.Spikes = rep.spikes()
	rep.Capacity = rep.capacities(rep.SLO)
	return rep, nil
}

// runStep runs one variant at one rate on a fresh sale; name is what the
// progress bar and the file of its vegeta results call the step.
func runStep(ctx context.Context, cfg Config, fleet storefront.Fleet, cat storefront.Catalogue, mix traffic.Mix, variant, name string, rate, n, total int) Step {
	st := Step{Variant: variant, Rate: rate}
	setup, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	fail := func(err error) Step {
		st.Err = err.Error()
		return st
	}
	if err := fleet.WaitReady(setup); err != nil {
		return fail(err)
	}
	if _, err := fleet.ResetSale(setup, cat); err != nil {
		return fail(err)
	}
	plan := storefront.FaultPlan{Seed: cfg.Seed, WorkMS: cfg.WorkMS, Batch: &cfg.Batch}
	if err := fleet.SetFaults(setup, plan); err != nil {
		return fail(err)
	}
	tr, err := traffic.NewTraffic(fleet.Bases(), []string{variant}, mix, cfg.Seed, traffic.NewTag())
	if err != nil {
		return fail(err)
	}
	before := lockStats(setup, fleet, variant)
	tally := traffic.NewTally()
	path, keep, done := cfg.stepResults(name, rate)
	st.Late, st.Cores, err = offer(ctx, cfg, fleet, tr.Targeter(), name, rate, n, total, func(r *vegeta.Result) { tally.Add(r); keep(r) })
	if err := errors.Join(err, done()); err != nil {
		return fail(err)
	}
	st.ResultsFile = path
	st.Summary = tally.Summary()
	st.Summary.Offered = float64(rate)
	st.Sales = st.Summary.SalesPerSecond
	if c := st.Summary.Counts; c.Requests > 0 {
		st.Unavailable = 100 * float64(c.Unavailable) / float64(c.Requests)
	}
	after, cancel2 := context.WithTimeout(ctx, 60*time.Second)
	defer cancel2()
	audit, err := fleet[0].Audit(after)
	if err != nil {
		return fail(fmt.Errorf("audit: %w", err))
	}
	st.LostUpdates = audit.LostUpdates
	st.CrossCheck = traffic.CrossCheck(st.Summary, audit)
	if now := lockStats(after, fleet, variant); now.Leases > before.Leases {
		leases := now.Leases - before.Leases
		st.Hold = time.Duration((now.Held - before.Held) / leases * float64(time.Second))
		st.HoldCeiling = 1 / st.Hold.Seconds()
		st.Tries = (now.Tries - before.Tries) / leases
		if d := st.Summary.Duration; d > 0 {
			st.Leases = leases / d.Seconds()
		}
	}
	return st
}

// lockStats adds up the lock metrics of variant over every instance; an
// instance whose metrics cannot be read counts nothing.
func lockStats(ctx context.Context, fleet storefront.Fleet, variant string) storefront.LockStats {
	var sum storefront.LockStats
	for _, a := range fleet {
		if st, err := a.LockStats(ctx, variant); err == nil {
			sum.Held += st.Held
			sum.Leases += st.Leases
			sum.Tries += st.Tries
		}
	}
	return sum
}

// WriteFiles writes sweep.txt, sweep.json, sweep.html, sweep-sales.svg and
// sweep-p99.svg into dir.
func (r *Report) WriteFiles(dir string) error {
	return output.WriteFiles(dir,
		output.File{Name: "sweep.txt", Write: r.WriteText},
		output.File{Name: "sweep.json", Write: r.WriteJSON},
		output.File{Name: "sweep.html", Write: r.WriteHTML},
		output.File{Name: "sweep-sales.svg", Write: output.SVG(r.SalesChart)},
		output.File{Name: "sweep-p99.svg", Write: output.SVG(r.P99Chart)},
	)
}
