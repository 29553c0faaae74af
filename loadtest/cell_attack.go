package loadtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/tsenart/vegeta/v12/lib/plot"

	"flashsale/loadtest/cluster"
	"flashsale/loadtest/linear"
	"flashsale/loadtest/output"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
)

// attack sends the cell's traffic with the scenario's node recipe beside
// it, and keeps vegeta's summary in the cell.
func (r *cellRun) attack(ctx context.Context, mix traffic.Mix, pl *plot.Plot, barDesc string, h *linear.History) error {
	cfg, sc, variant := r.cfg, r.sc, r.c.Variant
	tr, err := traffic.NewTraffic(r.e.bases, []string{variant}, mix, cfg.Seed, traffic.NewTag())
	if err != nil {
		return err
	}
	tr.KeepAsked()
	duration, maxRequests := cfg.Duration, cfg.MaxRequests
	if sc.MinDuration > duration {
		// The cap grows with the duration, so a longer attack keeps the rate.
		maxRequests = uint64(float64(maxRequests) * float64(sc.MinDuration) / float64(duration))
		duration = sc.MinDuration
	}
	pacer, err := traffic.CappedPacer(vegeta.Rate{Freq: cfg.Rate, Per: time.Second}, maxRequests)
	if err != nil {
		return err
	}
	enc, closeResults, err := r.results()
	if err != nil {
		return err
	}
	defer closeResults()
	bar := traffic.NewBar(cfg.Progress, maxRequests, barDesc)

	recipeCtx, stopRecipe := context.WithCancel(ctx)
	var recipeErr error
	var notesMu sync.Mutex
	var wg sync.WaitGroup
	if sc.Nodes != nil {
		wg.Go(func() {
			recipeErr = sc.Nodes.Run(recipeCtx, r.e.nodes, duration, cfg.LockPattern, func(s string) {
				notesMu.Lock()
				r.c.Notes = append(r.c.Notes, s)
				notesMu.Unlock()
				r.log.Info("node fault", "step", s)
			})
		})
	}
	readCtx, stopReads := context.WithCancel(ctx)
	wg.Go(func() { readDuring(readCtx, r.fleet, h, mix.Event) })
	tally := traffic.NewTally()
	var encErr error
	traffic.Attack(ctx, cfg.MaxWorkers, tr.Targeter(), pacer, duration, variant, func(res *vegeta.Result) {
		tally.Add(res)
		req, asked := tr.Asked(res.URL)
		if asked {
			h.Answer(req, res.Timestamp, res.Latency, res.Code, res.Headers, res.Body)
		}
		if res.Code == 0 {
			what := res.Method + " " + res.URL
			if asked {
				what = DescribeRequest(req)
			}
			r.c.Unanswered = NameUnanswered(r.c.Unanswered, Unanswered{Request: what, Waited: res.Latency, Error: res.Error})
		}
		if enc != nil && encErr == nil {
			encErr = enc.Encode(res)
		}
		if err := pl.Add(res); err != nil {
			r.log.Warn("latency plot", "err", err)
		}
		if bar != nil {
			_ = bar.Add(1) // a progress bar that cannot draw is no reason to stop
		}
	})
	stopRecipe()
	stopReads()
	wg.Wait()
	summary := tally.Summary()
	summary.Offered = float64(cfg.Rate)
	if bar != nil {
		bar.ChangeMax64(int64(summary.Counts.Requests))
		_ = bar.Finish()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %v", err)
	}
	r.c.Summary = summary
	if encErr != nil {
		r.c.Notes = append(r.c.Notes, "writing vegeta results: "+encErr.Error())
	}
	if recipeErr != nil {
		r.c.Notes = append(r.c.Notes, "node recipe: "+recipeErr.Error())
	}
	return nil
}

// results opens the file that keeps vegeta's results of the cell, when the
// run has an output directory; the encoder is nil when it has none.
func (r *cellRun) results() (vegeta.Encoder, func(), error) {
	if r.cfg.OutDir == "" {
		return nil, func() {}, nil
	}
	path := filepath.Join(r.cfg.OutDir, "results", r.sc.Name, output.FileName(r.c.Variant)+".bin")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	r.c.ResultsFile = path
	return vegeta.NewEncoder(f), func() { f.Close() }, nil
}

// after heals the nodes, counts the faults that fired, clears the fault
// plan, then reads the audit and scans Redis for stuck locks itself.
func (r *cellRun) after(ctx context.Context, firedBefore map[string]uint64) error {
	after, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, sc := &r.c, r.sc
	if sc.Nodes != nil {
		if err := r.e.nodes.Heal(after); err != nil {
			return fmt.Errorf("bringing the Redis nodes back: %v", err)
		}
	}
	if len(sc.Faults) > 0 {
		// Evidence that the fault really fired. The instances count fired
		// faults over their whole life, so this cell's are the difference.
		fired, err := r.fleet.Fired(after)
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
	if err := r.fleet.SetFaults(after, storefront.FaultPlan{}); err != nil {
		c.Notes = append(c.Notes, "clearing faults: "+err.Error())
	}
	if sc.Nodes != nil {
		// The audit scans every node: wait until the instances reach a
		// quorum again. (Restart-aware instances leave restarted nodes out
		// for a TTL; the in-flight requests that end an attack already take
		// longer than that, so the next cell finds them counted again.)
		if err := r.fleet.WaitReady(after); err != nil {
			return fmt.Errorf("after the attack: %v", err)
		}
	}
	var err error
	if c.Audit, err = r.fleet[0].Audit(after); err != nil {
		return err
	}
	c.StuckLocks = int(c.Audit.StuckLocks)
	if len(r.e.redis) > 0 {
		stuck, err := cluster.ScanStuckLocks(after, r.e.redis, r.cfg.LockPattern)
		if err != nil {
			c.Notes = append(c.Notes, "stuck-lock scan: "+err.Error())
		}
		c.StuckLockKeys = stuck
		if len(stuck) != c.StuckLocks {
			c.Notes = append(c.Notes, fmt.Sprintf("the runner's own scan found %d lock keys without a TTL, the audit %d", len(stuck), c.StuckLocks))
		}
		c.StuckLocks = max(c.StuckLocks, len(stuck))
	}
	c.CrossCheck = traffic.CrossCheck(c.Summary, c.Audit)
	return nil
}
