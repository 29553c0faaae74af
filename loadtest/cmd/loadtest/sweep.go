package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"flashsale/internal/cli"
	"flashsale/loadtest"
	"flashsale/loadtest/sweep"
	"flashsale/loadtest/traffic"
)

// sweepFlags are the sweep's own flags: its rates, its work, the spike,
// the SLO of its capacity line.
type sweepFlags struct {
	rates  string
	workMS int
	spike  bool
	slo    traffic.SLO
}

// runSweep is the command's -sweep mode: the matrix's flags where they
// apply (variants, duration, max-workers, seed, the local environment, out,
// progress), the sweep's own defaults where they were not given. With
// spike, a lock variant that missed a spike target fails the run.
func runSweep(ctx context.Context, cfg loadtest.Config, set map[string]bool, f sweepFlags, args []string, stdout, stderr io.Writer) int {
	rates, workMS, spike := f.rates, f.workMS, f.spike
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return code
	}
	if len(cfg.Targets) > 0 || len(cfg.Cells) > 0 || set["scenarios"] {
		return fail(2, fmt.Errorf("-sweep starts its own instances and has no scenarios: -targets, -cells and -scenarios do not apply"))
	}
	sc := sweep.Config{
		Variants: sweep.Variants, WorkMS: workMS, Seed: cfg.Seed, Batch: cfg.Batch,
		Local: cfg.Local, OutDir: cfg.OutDir, Progress: cfg.Progress, Logger: cfg.Logger, SLO: &f.slo,
	}
	if workMS == 0 {
		sc.WorkMS = -1 // the sweep's "none"
	}
	if set["variants"] {
		sc.Variants = cfg.Variants
	}
	if set["duration"] {
		sc.Duration = cfg.Duration
	}
	if set["max-workers"] {
		sc.MaxWorkers = cfg.MaxWorkers
	}
	for _, r := range cli.Split(rates) {
		n, err := strconv.Atoi(r)
		if err != nil {
			return fail(2, fmt.Errorf("-sweep-rates: %q is not a rate", r))
		}
		sc.Rates = append(sc.Rates, n)
	}
	rep, err := sweep.Run(ctx, sc)
	if err != nil {
		return fail(2, err)
	}
	rep.Command = "go run ./loadtest/cmd/loadtest " + strings.Join(args, " ")
	if err := rep.WriteText(stdout); err != nil {
		return fail(2, err)
	}
	if cfg.OutDir != "" {
		if err := rep.WriteFiles(cfg.OutDir); err != nil {
			return fail(2, err)
		}
		fmt.Fprintf(stdout, "\nwritten: %s (sweep.txt, sweep.json, sweep.html, sweep-sales.svg, sweep-p99.svg; vegeta results under results/sweep/<variant>@<rate>.bin, app logs under env/logs)\n", cfg.OutDir)
	}
	for _, st := range rep.Steps {
		if st.Err != "" {
			return 1
		}
	}
	if missed := rep.Missed(); spike && len(missed) > 0 {
		fmt.Fprintf(stderr, "loadtest: the spike missed a target for %s\n", strings.Join(missed, ", "))
		return 1
	}
	return 0
}
