package loadtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/tsenart/vegeta/v12/lib/plot"

	"flashsale/internal/machine"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
)

// env is what the cells run against.
type env struct {
	bases []string
	token string
	redis []string       // node URLs for the stuck-lock scan; nil if unknown
	nodes cluster.Nodes  // nil when the runner did not start the nodes
	local *cluster.Local // nil against running instances
}

// fleet is a client of every instance the cells attack.
func (e *env) fleet() storefront.Fleet { return storefront.NewFleet(e.bases, e.token) }

// Run runs the matrix and returns its report. It fails only when it could
// not run at all; a cell that could not be judged is in the report with the
// verdict Error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	named := namedVariants(cfg.Variants)
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var told []string
	if len(cfg.Targets) > 0 {
		probe, cancel := context.WithTimeout(ctx, probeTimeout)
		notes, err := cfg.fromInstances(probe, named)
		cancel()
		if err != nil {
			return nil, err
		}
		warning := fmt.Sprintf(resetWarning, strings.Join(cfg.Targets, ", "))
		cfg.Logger.Warn(resetLogLine, "targets", strings.Join(cfg.Targets, ", "))
		told = append(notes, warning)
	}
	rep := &Report{Started: time.Now(), Settings: settingsOf(cfg), Notes: told, Load: machine.Before()}
	e := &env{bases: cfg.Targets, token: cfg.AdminToken, redis: cfg.RedisURLs}
	if len(cfg.Targets) == 0 {
		local := cfg.Env
		if local == nil {
			var err error
			if local, err = cluster.StartLocal(ctx, cfg.Local); err != nil {
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
	rep.Notes = append(rep.Notes, traffic.OmissionNote(cfg.MaxWorkers))
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
		rep.Notes = append(rep.Notes, "-watchdog: every cell ran with the lease watchdog on; "+watchdogNote)
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
		warm := traffic.WarmUp{Variants: cfg.Variants, Rate: cfg.Rate, Duration: cfg.WarmUp, MaxWorkers: cfg.MaxWorkers,
			Seed: cfg.Seed, Catalogue: *cfg.Catalogue, Mix: *cfg.Mix}
		if err := warm.Run(ctx, e.fleet()); err != nil {
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
		cfg.Logger.Info("cell done", "variant", c.Variant, "scenario", c.Scenario, "expected", c.Expected, "seen", c.Seen, "verdict", c.Verdict,
			"oversold_units", c.Audit.OversoldUnits, "lost_updates", c.Audit.LostUpdates, "double_booked_seats", c.Audit.DoubleBookedSeats, "stuck_locks", c.StuckLocks,
			"reasons", strings.Join(c.Reasons, "; "))
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
	rep.Done()
	rep.summarise()
	return rep, nil
}

// clip shortens s to at most n bytes, for notes that quote a log.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
