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
)

// scaleFlags are the flags of the -scale mode.
type scaleFlags struct {
	skus, instances, nodes string
	rate                   int
	postgres, img, redraw  string
	workMS                 int
}

// ints reads a comma-separated list of counts.
func ints(flag, list string) ([]int, error) {
	var out []int
	for _, s := range cli.Split(list) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-%s: %q is not a count", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// runScale is the command's -scale mode (and -scale-redraw, which draws an
// earlier run's plots again): the matrix's flags where they apply
// (variants, duration, the local environment, out, progress), the scale
// run's own defaults where they were not given.
func runScale(ctx context.Context, cfg loadtest.Config, set map[string]bool, f scaleFlags, args []string, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return code
	}
	if f.redraw != "" {
		if f.img == "" {
			return fail(2, fmt.Errorf("-scale-redraw needs -scale-img, the directory to draw into"))
		}
		rep, err := sweep.ReadScale(f.redraw)
		if err != nil {
			return fail(2, err)
		}
		if err := rep.WritePlots(f.img); err != nil {
			return fail(2, err)
		}
		fmt.Fprintf(stdout, "drawn again into %s\n", f.img)
		return 0
	}
	if len(cfg.Targets) > 0 || len(cfg.Cells) > 0 || set["scenarios"] {
		return fail(2, fmt.Errorf("-scale starts its own instances and has no scenarios: -targets, -cells and -scenarios do not apply"))
	}
	sc := sweep.ScaleConfig{Rate: f.rate, Postgres: f.postgres, WorkMS: f.workMS, Local: cfg.Local, OutDir: cfg.OutDir, Progress: cfg.Progress, Logger: cfg.Logger}
	if f.workMS == 0 {
		sc.WorkMS = -1 // the sweep's "none"
	}
	var err error
	if sc.SKUs, err = ints("scale-skus", f.skus); err != nil {
		return fail(2, err)
	}
	if sc.Instances, err = ints("scale-instances", f.instances); err != nil {
		return fail(2, err)
	}
	if sc.Nodes, err = ints("scale-nodes", f.nodes); err != nil {
		return fail(2, err)
	}
	if set["variants"] {
		sc.Variants = cfg.Variants
	}
	if set["duration"] {
		sc.Duration = cfg.Duration
	}
	if set["batch"] {
		sc.Batch = []bool{cfg.Batch}
	}
	rep, err := sweep.Scale(ctx, sc)
	if err != nil {
		return fail(2, err)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	rep.Command = "go run ./loadtest/cmd/loadtest " + strings.Join(quoted, " ")
	if err := rep.WriteText(stdout); err != nil {
		return fail(2, err)
	}
	for _, dir := range []string{cfg.OutDir, f.img} {
		if dir == "" {
			continue
		}
		write := rep.WriteFiles
		if dir == f.img {
			write = rep.WritePlots
		}
		if err := write(dir); err != nil {
			return fail(2, err)
		}
		fmt.Fprintf(stdout, "written: %s\n", dir)
	}
	if len(rep.Errors) > 0 {
		return 1
	}
	for _, p := range rep.Points {
		if p.Step.Err != "" {
			return 1
		}
	}
	return 0
}

// shellQuote is a as a shell reads it back: as it is when it holds nothing
// the shell would take apart, else in single quotes.
func shellQuote(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+-@") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
