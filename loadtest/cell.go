package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tsenart/vegeta/v12/lib/plot"

	"flashsale/loadtest/cluster"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
)

// cellPlan is one cell to run: a variant under a scenario.
type cellPlan struct {
	sc      Scenario
	variant string
}

// skipped is why a cell could not run here: its verdict is Skipped, not
// Error.
type skipped string

func (s skipped) Error() string { return string(s) }

// cellRun is one cell as it runs: what it runs against, and the cell its
// steps fill in.
type cellRun struct {
	cfg   Config
	e     *env
	sc    Scenario
	c     Cell
	log   *slog.Logger
	fleet storefront.Fleet
}

// runCell runs one cell and judges it. Whatever goes wrong is in the cell:
// a step that fails makes its verdict Error, one that finds the cell cannot
// run here makes it Skipped.
func runCell(ctx context.Context, cfg Config, e *env, p cellPlan, pl *plot.Plot, n, total int) Cell {
	judged := p.variant
	if cfg.JudgeAs != "" {
		judged = cfg.JudgeAs
	}
	exp, _ := Expected(judged, p.sc.Name)
	if cfg.Watchdog {
		exp, _ = ExpectedWatchdog(judged, p.sc.Name)
	}
	if cfg.Batch {
		exp = batched(judged, exp)
	}
	r := &cellRun{cfg: cfg, e: e, sc: p.sc,
		c:   Cell{Variant: p.variant, Scenario: p.sc.Name, Expected: exp, Initial: cfg.Catalogue.Initial(), HotSKU: cfg.Mix.HotSKU},
		log: cfg.Logger.With("variant", p.variant, "scenario", p.sc.Name),
	}
	err := r.run(ctx, pl, fmt.Sprintf("[%2d/%d] %-13s × %-27s", n, total, p.variant, p.sc.Name))
	var skip skipped
	switch {
	case errors.As(err, &skip):
		r.c.Verdict = VerdictSkipped
		r.c.Notes = append(r.c.Notes, string(skip))
	case err != nil:
		r.c.Verdict = VerdictError
		r.c.Reasons = append(r.c.Reasons, err.Error())
	default:
		r.c.judge()
		r.c.agree()
	}
	return r.c
}

// run is the cell's steps in order.
func (r *cellRun) run(ctx context.Context, pl *plot.Plot, bar string) error {
	if err := r.instances(ctx); err != nil {
		return err
	}
	r.fleet = r.e.fleet()
	mix, firedBefore, err := r.setUp(ctx)
	if err != nil {
		return err
	}
	h := newHistory(*r.cfg.Catalogue)
	if err := r.attack(ctx, mix, pl, bar, h); err != nil {
		return err
	}
	final, cancel := context.WithTimeout(ctx, 10*time.Second)
	ReadInto(final, r.fleet[0], h, mix.Event) // what the sale left, after every answer
	h.Resolve(func(user string) (int, error) { return r.fleet[0].Orders(final, user) })
	cancel()
	if err := r.after(ctx, firedBefore); err != nil {
		return err
	}
	r.check(h)
	return nil
}

// instances checks that the scenario can run against this environment and
// restarts the local instances with the settings it needs.
func (r *cellRun) instances(ctx context.Context) error {
	sc, e := r.sc, r.e
	if sc.Nodes != nil && e.nodes == nil {
		return skipped("skipped: node faults need Redis nodes the runner started itself")
	}
	if sc.Nodes != nil && e.nodes.Len() < sc.Nodes.MinNodes {
		return skipped(fmt.Sprintf("skipped: needs at least %d Redis nodes", sc.Nodes.MinNodes))
	}
	if e.local == nil && (sc.Unaware || sc.LockTTL != 0) {
		return skipped("skipped: the scenario needs instance settings only instances the runner starts can be given")
	}
	if e.local == nil {
		return nil
	}
	want := cluster.AppSettings{Unaware: sc.Unaware, LockTTL: sc.LockTTL, Failover: sc.Failover}
	err := e.local.Use(ctx, want)
	e.bases = e.local.Bases() // new processes, new ports, even after a failure
	switch {
	case err != nil && sc.Unaware:
		return skipped(fmt.Sprintf("skipped: could not start the storefront with restart awareness off (%s): %v",
			strings.Join(e.local.UnawareArgs(), " "), clip(err.Error(), 600)))
	case err != nil:
		return fmt.Errorf("restarting the app instances with %+v: %v", want, err)
	}
	return nil
}

// setUp starts a clean sale and gives every instance the scenario's
// faults, seeded. It returns the traffic's mix, with the sale's seats, and
// the fault counters before the attack.
func (r *cellRun) setUp(ctx context.Context) (traffic.Mix, map[string]uint64, error) {
	setup, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	mix := *r.cfg.Mix
	if err := r.fleet.WaitReady(setup); err != nil {
		return mix, nil, fmt.Errorf("before the attack: %v", err)
	}
	state, err := r.fleet.ResetSale(setup, *r.cfg.Catalogue)
	if err != nil {
		return mix, nil, err
	}
	if mix.SeatShare > 0 {
		mix.Event = state.Event
		if mix.Seats, err = r.fleet[0].Seats(setup, state.Event); err != nil {
			return mix, nil, err
		}
		if len(mix.Seats) == 0 {
			mix.SeatShare = 0
		}
	}
	watchdog, fast := r.sc.Watchdog || r.cfg.Watchdog, !r.cfg.Taught
	plan := storefront.FaultPlan{Seed: r.cfg.Seed, WorkMS: r.sc.WorkMS, Faults: r.sc.Faults, Watchdog: &watchdog, Fast: &fast, Batch: &r.cfg.Batch}
	if err := r.fleet.SetFaults(setup, plan); err != nil {
		return mix, nil, err
	}
	fired, err := r.fleet.Fired(setup)
	if err != nil {
		r.c.Notes = append(r.c.Notes, "reading fault counters: "+err.Error())
	}
	return mix, fired, nil
}
