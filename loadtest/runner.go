package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/tsenart/vegeta/v12/lib/plot"
	"golang.org/x/sync/errgroup"
)

// Config configures a run of the matrix. The zero value of every field
// means its default.
type Config struct {
	// Variants and Scenarios select the matrix's rows and columns; nil
	// means all of them.
	Variants  []string
	Scenarios []string
	// Cells, when set, runs only these cells, each "variant/scenario"
	// (e.g. "redlock/node-down"), within the selected rows and columns.
	Cells []string

	// JudgeAs, when set, judges every cell against this variant's expected
	// outcomes instead of its own: the cells of a rung being written
	// (lock/attendee.go) against the row it should reach.
	JudgeAs string

	// Rate is the requests per second of every attack. Default 300.
	Rate int
	// Duration is how long every attack lasts. Default 4s.
	Duration time.Duration
	// MaxRequests caps the requests of one attack. Default Rate × Duration.
	MaxRequests uint64
	// MaxWorkers caps vegeta's workers, hence the requests in flight.
	// Default 128.
	MaxWorkers uint64
	// Seed fixes the traffic and the faults; every variant of a scenario
	// gets the same ones. Default 1.
	Seed uint64

	// Catalogue is what every cell's sale starts with. Default
	// CellCatalogue().
	Catalogue *Catalogue
	// Mix is the shape of the traffic; its SKUs default to the catalogue's
	// (the first product hot, the others bulk). Default DefaultMix().
	Mix *Mix

	// LockTTL is the instances' lease TTL: it sizes the pause faults and the
	// node recipes. Default 500ms.
	LockTTL time.Duration
	// Watchdog turns the lease watchdog on in every cell, not only in the
	// columns that ask for it; the cells are judged as WatchdogTwin says.
	// Off, every cell runs with the watchdog its column asks for (off but
	// in long-work-watchdog), whatever the instances were started with.
	Watchdog bool
	// Taught runs every cell with the locks' speed layer off (-fast=false):
	// exactly the taught code, a waiter retrying after a random delay and
	// every release the rung's own. The expected outcomes are the same.
	Taught bool
	// Batch runs every cell with batching under one lease on (the app's
	// -batch, switched with the fault plan); the cells are judged as
	// ExpectedBatched says. Off, batching is switched off in every cell.
	Batch bool

	// Targets are running instances to attack instead of starting a local
	// environment. They must share one database and one set of Redis
	// nodes. Node scenarios are skipped against them.
	Targets []string
	// AdminToken is the Targets' admin token.
	AdminToken string
	// RedisURLs are the Targets' Redis nodes, for the runner's own scan for
	// stuck locks; without them only the audit's figure is used.
	RedisURLs []string
	// LockPattern matches lock keys in Redis. Default DefaultLockPattern.
	LockPattern string

	// Local configures the environment started when Targets is empty.
	Local LocalConfig
	// Env, when set (and Targets empty), is an environment already started
	// by StartLocal to run the cells in instead of starting one; Run leaves
	// it running. A caller running cells one Run at a time (each with its
	// own rate and duration) pays for the environment once.
	Env *Local

	// WarmUp is how long the unrecorded warm-up attack before the first
	// cell lasts. Default 1s; negative for none (one cell run by hand, say).
	WarmUp time.Duration

	// OutDir receives vegeta's binary results per cell; "" writes none.
	OutDir string
	// Progress receives a progress bar per cell; nil shows none.
	Progress io.Writer
	// Logger receives notes as the run goes. Default: discard.
	Logger *slog.Logger
}

// CellCatalogue is the sale every cell starts with, made for measuring
// rather than for shoppers (the storefront's own default sale is
// inventory.DefaultCatalogue): one scarce hot SKU (it sells out, so
// overselling shows), four bulk SKUs that never sell out in a run (they
// carry the throughput) and a small seat map that seat grabs fight over.
func CellCatalogue() Catalogue {
	c := Catalogue{Seats: 20, Products: []Product{{SKU: "hot", Name: "Hot drop", PriceCents: 4999, Stock: 40}}}
	for i := 1; i <= 4; i++ {
		c.Products = append(c.Products, Product{SKU: fmt.Sprintf("bulk-%d", i), Name: fmt.Sprintf("Bulk item %d", i), PriceCents: 999, Stock: 100_000})
	}
	return c
}

// DefaultMix sends 20% of requests to seats, and of the purchases half to
// the hot SKU; 5% of all requests resend an earlier one.
func DefaultMix() Mix {
	return Mix{SeatShare: 0.2, HotShare: 0.5, DuplicateShare: 0.05}
}

func (c *Config) defaults() error {
	var err error
	if c.Variants, err = pick(strings.Join(c.Variants, ","), Variants); err != nil {
		return fmt.Errorf("variants: %w", err)
	}
	if c.Scenarios, err = pick(strings.Join(c.Scenarios, ","), ScenarioNames()); err != nil {
		return fmt.Errorf("scenarios: %w", err)
	}
	for i, cell := range c.Cells {
		v, sc, ok := strings.Cut(cell, "/")
		if !ok || !slices.Contains(Variants, v) || !slices.Contains(ScenarioNames(), sc) {
			return fmt.Errorf("cell %q: want variant/scenario, e.g. redlock/node-down", cell)
		}
		if _, ok := Expected(v, sc); !ok {
			return fmt.Errorf("cell %q is not in the matrix", cell)
		}
		if c.Watchdog {
			c.Cells[i] = v + "/" + WatchdogTwin(sc)
		}
	}
	if c.Watchdog {
		var twins []string
		for _, sc := range c.Scenarios {
			if t := WatchdogTwin(sc); !slices.Contains(twins, t) {
				twins = append(twins, t)
			}
		}
		c.Scenarios = twins
	}
	if c.JudgeAs != "" && !slices.Contains(Variants, c.JudgeAs) {
		return fmt.Errorf("judge as %q: not a variant (known: %s)", c.JudgeAs, strings.Join(Variants, ", "))
	}
	if c.Rate == 0 {
		c.Rate = 300
	}
	if c.Duration == 0 {
		c.Duration = 4 * time.Second
	}
	if c.Rate < 0 || c.Duration < 0 {
		return errors.New("rate and duration must be positive")
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = uint64(float64(c.Rate) * c.Duration.Seconds())
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = 128
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.WarmUp == 0 {
		c.WarmUp = time.Second
	}
	if c.Catalogue == nil {
		cat := CellCatalogue()
		c.Catalogue = &cat
	}
	if c.Mix == nil {
		m := DefaultMix()
		c.Mix = &m
	}
	if c.Mix.HotSKU == "" && len(c.Mix.BulkSKUs) == 0 {
		for i, p := range c.Catalogue.Products {
			if i == 0 {
				c.Mix.HotSKU = p.SKU
			} else {
				c.Mix.BulkSKUs = append(c.Mix.BulkSKUs, p.SKU)
			}
		}
	}
	if c.Catalogue.Seats == 0 {
		c.Mix.SeatShare = 0
	}
	if c.LockTTL == 0 {
		c.LockTTL = 500 * time.Millisecond
	}
	if c.Local.LockTTL == 0 {
		c.Local.LockTTL = c.LockTTL
	}
	if c.LockPattern == "" {
		c.LockPattern = DefaultLockPattern
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Local.Logger == nil {
		c.Local.Logger = c.Logger
	}
	for _, t := range c.Targets {
		if err := loopbackURL(t); err != nil {
			return err
		}
	}
	if len(c.Targets) > 0 && c.AdminToken == "" {
		return errors.New("attacking running instances needs their admin token")
	}
	return nil
}

// env is what the cells run against.
type env struct {
	bases []string
	token string
	redis []string // node URLs for the stuck-lock scan; nil if unknown
	nodes Nodes    // nil when the runner did not start the nodes
	local *Local   // nil against running instances
}

func (e *env) apis() []API {
	out := make([]API, len(e.bases))
	for i, b := range e.bases {
		out[i] = API{Base: b, Token: e.token}
	}
	return out
}

// Run runs the matrix and returns its report. It fails only when it could
// not run at all; a cell that could not be judged is in the report with the
// verdict Error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now(), Settings: settingsOf(cfg)}
	e := &env{bases: cfg.Targets, token: cfg.AdminToken, redis: cfg.RedisURLs}
	if len(cfg.Targets) == 0 {
		local := cfg.Env
		if local == nil {
			var err error
			if local, err = StartLocal(ctx, cfg.Local); err != nil {
				return nil, err
			}
			defer func() {
				if err := local.Close(); err != nil {
					cfg.Logger.Warn("stopping the local environment", "err", err)
				}
			}()
		}
		e = &env{bases: local.Bases(), token: local.Token(), redis: local.RedisURLs(), nodes: local.Nodes(), local: local}
		rep.Settings.Instances, rep.Settings.Nodes = len(e.bases), len(e.redis)
	} else {
		rep.Notes = append(rep.Notes, "attacking running instances: node-down and node-restart need Redis nodes the runner started itself, so they are skipped")
	}
	if cfg.JudgeAs != "" {
		rep.Notes = append(rep.Notes, fmt.Sprintf("every cell is judged against %s's expected outcomes (-judge-as), not its own", cfg.JudgeAs))
	}
	if len(e.redis) == 0 {
		rep.Notes = append(rep.Notes, "no Redis URLs given: stuck locks are the audit's figure only")
	}
	if cfg.Taught {
		rep.Notes = append(rep.Notes, "-fast=false: every cell ran with the locks' speed layer off (the taught code: retry after a random delay, each rung's own release)")
	}
	if cfg.Watchdog {
		rep.Notes = append(rep.Notes, "-watchdog: every cell ran with the lease watchdog on; long-work ran as long-work-watchdog, "+
			"and every other column keeps its expectation (a pause freezes the watchdog, a crash stops it, a release stops it first)")
	}

	if cfg.Batch {
		rep.Notes = append(rep.Notes, "-batch: every cell ran with batching under one lease on; "+batchNote)
	}

	var plan []cellPlan
	for _, sc := range Scenarios(cfg.LockTTL) {
		if !slices.Contains(cfg.Scenarios, sc.Name) {
			continue
		}
		cells := len(plan)
		for _, v := range cfg.Variants {
			if sc.Applies(v) && (len(cfg.Cells) == 0 || slices.Contains(cfg.Cells, v+"/"+sc.Name)) {
				plan = append(plan, cellPlan{sc: sc, variant: v})
			}
		}
		if len(plan) > cells {
			rep.Scenarios = append(rep.Scenarios, sc)
		}
	}
	for _, v := range cfg.Variants {
		if slices.ContainsFunc(plan, func(p cellPlan) bool { return p.variant == v }) {
			rep.Variants = append(rep.Variants, v)
		}
	}
	// Cells that need other instance settings go last, grouped, so the
	// instances are restarted once per group rather than back and forth.
	group := func(s Scenario) int {
		switch {
		case s.Failover:
			return 3
		case s.Unaware:
			return 2
		case s.LockTTL != 0:
			return 1
		default:
			return 0
		}
	}
	slices.SortStableFunc(plan, func(a, b cellPlan) int { return group(a.sc) - group(b.sc) })

	if len(plan) > 0 && cfg.WarmUp > 0 {
		if err := warmUp(ctx, cfg, e); err != nil {
			return nil, err
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("a %v warm-up attack over every selected variant ran first (connections, caches); its results are not counted", cfg.WarmUp))
	}

	plots := map[string]*plot.Plot{}
	for i, p := range plan {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pl := plots[p.sc.Name]
		if pl == nil {
			pl = plot.New(plot.Title("flashsale · "+p.sc.Name+" · latency by lock variant"),
				plot.Downsample(3000), plot.Label(func(*vegeta.Result) string { return "latency" }))
			plots[p.sc.Name] = pl
		}
		c := runCell(ctx, cfg, e, p, pl, i+1, len(plan))
		cfg.Logger.Info("cell done", "variant", c.Variant, "scenario", c.Scenario, "expected", c.Expected, "seen", c.Seen, "verdict", c.Verdict, "reasons", strings.Join(c.Reasons, "; "))
		rep.Cells = append(rep.Cells, c)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.plots = map[string][]byte{}
	for name, pl := range plots {
		pl.Close()
		var b strings.Builder
		if _, err := pl.WriteTo(&b); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("latency plot of %s: %v", name, err))
			continue
		}
		rep.plots[name] = []byte(b.String())
	}
	rep.Finished = time.Now()
	rep.summarise()
	return rep, nil
}

type cellPlan struct {
	sc      Scenario
	variant string
}

// runCell runs one cell and judges it. Whatever goes wrong is in the cell.
func runCell(ctx context.Context, cfg Config, e *env, p cellPlan, pl *plot.Plot, n, total int) Cell {
	sc, variant := p.sc, p.variant
	judged := variant
	if cfg.JudgeAs != "" {
		judged = cfg.JudgeAs
	}
	exp, _ := Expected(judged, sc.Name)
	if cfg.Batch {
		exp, _ = ExpectedBatched(judged, sc.Name)
	}
	c := Cell{Variant: variant, Scenario: sc.Name, Expected: exp, Initial: cfg.Catalogue.Initial(), HotSKU: cfg.Mix.HotSKU}
	log := cfg.Logger.With("variant", variant, "scenario", sc.Name)
	fail := func(format string, args ...any) Cell {
		c.Verdict = VerdictError
		c.Reasons = append(c.Reasons, fmt.Sprintf(format, args...))
		return c
	}
	skip := func(why string) Cell {
		c.Verdict = VerdictSkipped
		c.Notes = append(c.Notes, why)
		return c
	}

	// The environment the scenario needs.
	if sc.Nodes != nil && e.nodes == nil {
		return skip("skipped: node faults need Redis nodes the runner started itself")
	}
	if sc.Nodes != nil && e.nodes.Len() < sc.Nodes.MinNodes {
		return skip(fmt.Sprintf("skipped: needs at least %d Redis nodes", sc.Nodes.MinNodes))
	}
	if e.local == nil && (sc.Unaware || sc.LockTTL != 0) {
		return skip("skipped: the scenario needs instance settings only instances the runner starts can be given")
	}
	if e.local != nil {
		want := AppSettings{Unaware: sc.Unaware, LockTTL: sc.LockTTL, Failover: sc.Failover}
		err := e.local.Use(ctx, want)
		e.bases = e.local.Bases() // new processes, new ports, even after a failure
		switch {
		case err != nil && sc.Unaware:
			return skip(fmt.Sprintf("skipped: could not start the storefront with restart awareness off (%s): %v",
				strings.Join(e.local.cfg.UnawareArgs, " "), clip(err.Error(), 600)))
		case err != nil:
			return fail("restarting the app instances with %+v: %v", want, err)
		}
	}
	apis := e.apis()

	// 1. A clean sale and the scenario's faults, seeded.
	setup, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, a := range apis {
		if err := a.WaitReady(setup); err != nil {
			return fail("before the attack: %v", err)
		}
	}
	state, err := resetSale(setup, apis[0], *cfg.Catalogue)
	if err != nil {
		return fail("%v", err)
	}
	mix := *cfg.Mix
	if mix.SeatShare > 0 {
		mix.Event = state.Event
		if mix.Seats, err = apis[0].Seats(setup, state.Event); err != nil {
			return fail("%v", err)
		}
		if len(mix.Seats) == 0 {
			mix.SeatShare = 0
		}
	}
	watchdog, fast := sc.Watchdog || cfg.Watchdog, !cfg.Taught
	faults := FaultPlan{Seed: cfg.Seed, WorkMS: sc.WorkMS, Faults: sc.Faults, Watchdog: &watchdog, Fast: &fast, Batch: &cfg.Batch}
	if err := forAll(setup, apis, func(ctx context.Context, a API) error { return a.SetFaults(ctx, faults) }); err != nil {
		return fail("%v", err)
	}

	firedBefore, err := firedOn(setup, apis)
	if err != nil {
		c.Notes = append(c.Notes, "reading fault counters: "+err.Error())
	}

	// 2. The attack, and the node recipe beside it.
	tag := randomTag()
	tr, err := NewTraffic(e.bases, []string{variant}, mix, cfg.Seed, tag)
	if err != nil {
		return fail("%v", err)
	}
	duration, maxRequests := cfg.Duration, cfg.MaxRequests
	if sc.MinDuration > duration {
		// The cap grows with the duration, so a longer attack keeps the rate.
		maxRequests = uint64(float64(maxRequests) * float64(sc.MinDuration) / float64(duration))
		duration = sc.MinDuration
	}
	pacer, err := CappedPacer(vegeta.Rate{Freq: cfg.Rate, Per: time.Second}, maxRequests)
	if err != nil {
		return fail("%v", err)
	}
	var enc vegeta.Encoder
	if cfg.OutDir != "" {
		path := filepath.Join(cfg.OutDir, "results", sc.Name, fileName(variant)+".bin")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fail("%v", err)
		}
		f, err := os.Create(path)
		if err != nil {
			return fail("%v", err)
		}
		defer f.Close()
		enc = vegeta.NewEncoder(f)
		c.ResultsFile = path
	}
	bar := newBar(cfg.Progress, maxRequests, fmt.Sprintf("[%2d/%d] %-13s × %-27s", n, total, variant, sc.Name))

	recipeCtx, stopRecipe := context.WithCancel(ctx)
	var recipeErr error
	var notesMu sync.Mutex
	var wg sync.WaitGroup
	if sc.Nodes != nil {
		wg.Go(func() {
			recipeErr = sc.Nodes.Run(recipeCtx, e.nodes, duration, cfg.LockPattern, func(s string) {
				notesMu.Lock()
				c.Notes = append(c.Notes, s)
				notesMu.Unlock()
				log.Info("node fault", "step", s)
			})
		})
	}
	tally := NewTally()
	var encErr error
	attack(ctx, cfg.MaxWorkers, tr.Targeter(), pacer, duration, variant, func(r *vegeta.Result) {
		tally.Add(r)
		if enc != nil && encErr == nil {
			encErr = enc.Encode(r)
		}
		if err := pl.Add(r); err != nil {
			log.Warn("latency plot", "err", err)
		}
		if bar != nil {
			_ = bar.Add(1) // a progress bar that cannot draw is no reason to stop
		}
	})
	stopRecipe()
	wg.Wait()
	if bar != nil {
		bar.ChangeMax64(int64(tally.counts.Requests))
		_ = bar.Finish()
	}
	if err := ctx.Err(); err != nil {
		return fail("interrupted: %v", err)
	}
	c.Summary = tally.Summary()
	if encErr != nil {
		c.Notes = append(c.Notes, "writing vegeta results: "+encErr.Error())
	}
	if recipeErr != nil {
		c.Notes = append(c.Notes, "node recipe: "+recipeErr.Error())
	}

	// 3. Heal, then read the audit and look at Redis ourselves.
	after, cancel2 := context.WithTimeout(ctx, 60*time.Second)
	defer cancel2()
	if sc.Nodes != nil {
		if err := e.nodes.Heal(after); err != nil {
			return fail("bringing the Redis nodes back: %v", err)
		}
	}
	if len(sc.Faults) > 0 {
		// Evidence that the fault really fired. The instances count fired
		// faults over their whole life, so this cell's are the difference.
		fired, err := firedOn(after, apis)
		if err != nil {
			c.Notes = append(c.Notes, "reading fault counters: "+err.Error())
		}
		for p, n := range fired {
			if d := n - firedBefore[p]; n > firedBefore[p] {
				if c.FaultsFired == nil {
					c.FaultsFired = map[string]uint64{}
				}
				c.FaultsFired[p] = d
			}
		}
	}
	if err := forAll(after, apis, func(ctx context.Context, a API) error { return a.SetFaults(ctx, FaultPlan{}) }); err != nil {
		c.Notes = append(c.Notes, "clearing faults: "+err.Error())
	}
	if sc.Nodes != nil {
		// The audit scans every node: wait until the instances reach a
		// quorum again. (Restart-aware instances leave restarted nodes out
		// for a TTL; the in-flight requests that end an attack already take
		// longer than that, so the next cell finds them counted again.)
		for _, a := range apis {
			if err := a.WaitReady(after); err != nil {
				return fail("after the attack: %v", err)
			}
		}
	}
	c.Audit, err = apis[0].Audit(after)
	if err != nil {
		return fail("%v", err)
	}
	c.StuckLocks = int(c.Audit.StuckLocks)
	if len(e.redis) > 0 {
		stuck, err := ScanStuckLocks(after, e.redis, cfg.LockPattern)
		if err != nil {
			c.Notes = append(c.Notes, "stuck-lock scan: "+err.Error())
		}
		c.StuckLockKeys = stuck
		if len(stuck) != c.StuckLocks {
			c.Notes = append(c.Notes, fmt.Sprintf("the runner's own scan found %d lock keys without a TTL, the audit %d", len(stuck), c.StuckLocks))
		}
		c.StuckLocks = max(c.StuckLocks, len(stuck))
	}
	c.CrossCheck = CrossCheck(c.Summary, c.Audit)
	c.judge()
	return c
}

// attack runs one vegeta attack named name and hands each result to each,
// in order, until the attack ends; it stops the attack when ctx ends.
func attack(ctx context.Context, maxWorkers uint64, tr vegeta.Targeter, p vegeta.Pacer, d time.Duration, name string, each func(*vegeta.Result)) {
	// A new Attacker per attack: in v12.12.0 one whose attack has ended
	// keeps its stop channel closed and never attacks again.
	atk := vegeta.NewAttacker(
		vegeta.Workers(min(16, maxWorkers)),
		vegeta.MaxWorkers(maxWorkers),
		vegeta.MaxBody(16<<10), // orders and errors are small; a runaway body must not be buffered whole
		vegeta.Timeout(30*time.Second),
		vegeta.KeepAlive(true),
		vegeta.Connections(int(maxWorkers)),
	)
	results := atk.Attack(tr, p, d, name)
	for {
		var r *vegeta.Result
		var ok bool
		select {
		case r, ok = <-results:
		case <-ctx.Done():
			atk.Stop()
			r, ok = <-results
		}
		if !ok {
			return
		}
		each(r)
	}
}

// firedOn sums the fault counters of every instance, by point.
func firedOn(ctx context.Context, apis []API) (map[string]uint64, error) {
	total := map[string]uint64{}
	var mu sync.Mutex
	err := forAll(ctx, apis, func(ctx context.Context, a API) error {
		fired, err := a.Fired(ctx)
		mu.Lock()
		defer mu.Unlock()
		for p, n := range fired {
			total[p] += n
		}
		return err
	})
	return total, err
}

// warmUp sends a short attack over every selected variant before the first
// cell and throws its results away: the first requests of a fresh instance
// pay for connections to every Redis node and for cold caches, which would
// otherwise be charged to whichever cell happens to run first. It fails
// when no request got an answer: then no cell could be judged either.
func warmUp(ctx context.Context, cfg Config, e *env) error {
	apis := e.apis()
	setup, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, a := range apis {
		if err := a.WaitReady(setup); err != nil {
			return err
		}
	}
	if _, err := resetSale(setup, apis[0], *cfg.Catalogue); err != nil {
		return err
	}
	if err := forAll(setup, apis, func(ctx context.Context, a API) error { return a.SetFaults(ctx, FaultPlan{}) }); err != nil {
		return err
	}
	mix := *cfg.Mix
	mix.SeatShare = 0 // seats need the seat map; purchases warm up the same paths
	tr, err := NewTraffic(e.bases, cfg.Variants, mix, cfg.Seed, "warm-"+randomTag())
	if err != nil {
		return err
	}
	pacer, err := CappedPacer(vegeta.Rate{Freq: cfg.Rate, Per: time.Second}, uint64(float64(cfg.Rate)*cfg.WarmUp.Seconds())+1)
	if err != nil {
		return err
	}
	atk := vegeta.NewAttacker(vegeta.Workers(min(16, cfg.MaxWorkers)), vegeta.MaxWorkers(cfg.MaxWorkers), vegeta.MaxBody(16<<10), vegeta.Timeout(30*time.Second))
	answered, sent := 0, 0
	for r := range atk.Attack(tr.Targeter(), pacer, cfg.WarmUp, "warm-up") {
		sent++
		if r.Code != 0 {
			answered++
		}
	}
	if sent > 0 && answered == 0 {
		return fmt.Errorf("warm-up: none of %d requests got an answer from %s", sent, strings.Join(e.bases, ", "))
	}
	return ctx.Err()
}

// resetSale resets through one instance, retrying briefly: right after a
// node fault a reset can find a node still coming back.
func resetSale(ctx context.Context, a API, cat Catalogue) (ResetState, error) {
	var err error
	for try := 0; try < 10; try++ {
		var st ResetState
		if st, err = a.Reset(ctx, cat); err == nil {
			if st.Event == "" {
				st.Event = "gala"
			}
			return st, nil
		}
		var ae *APIError
		if errors.As(err, &ae) && ae.Status/100 == 4 {
			return ResetState{}, err // the request is wrong; retrying will not help
		}
		if !sleep(ctx, 200*time.Millisecond) {
			break
		}
	}
	return ResetState{}, err
}

// forAll calls fn on every instance in parallel: each has its own fault
// plan.
func forAll(ctx context.Context, apis []API, fn func(context.Context, API) error) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, a := range apis {
		g.Go(func() error { return fn(ctx, a) })
	}
	return g.Wait()
}

func newBar(w io.Writer, max uint64, desc string) *progressbar.ProgressBar {
	if w == nil {
		return nil
	}
	return progressbar.NewOptions64(int64(max),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(24),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("req"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
}

func randomTag() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

// fileName turns a variant name into a file name ("lua+fence" → "lua-fence").
func fileName(s string) string { return strings.ReplaceAll(s, "+", "-") }

// clip shortens s to at most n bytes, for notes that quote a log.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
