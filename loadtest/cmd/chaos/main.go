// Command chaos runs flashsale's lock variants side by side for minutes
// while a seeded nemesis breaks the world — Redis nodes crashed, wiped,
// flushed, paused and failed over, app processes paused and killed, node clocks jumping, replies
// delayed, the network partitioned — then judges every variant with a
// checker that reads the recorded history and the database.
//
//	go run ./loadtest/cmd/chaos -duration 2m -seed 7 -variants redlock,redlock+fence -out out/chaos
//
// It writes DIR/chaos.json and DIR/chaos.html (the timeline), and keeps the
// histories (env/history-app*.jsonl, client.jsonl, nemesis.jsonl) beside
// them; -check DIR judges such a directory again. Exit status: 0 when every variant did what it must; 1 when a
// variant that must hold broke (or, with -strict, one expected to break
// held); 2 when the run could not start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"flashsale/internal/cli"
	"flashsale/loadtest"
	"flashsale/loadtest/chaos"
	"flashsale/loadtest/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command, callable from tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		variants  = fs.String("variants", "all", "lock variants to run side by side, comma-separated: "+strings.Join(loadtest.Variants, ", "))
		faults    = fs.String("faults", "all", "nemesis fault kinds, comma-separated: "+strings.Join(chaos.FaultKinds, ", "))
		duration  = fs.Duration("duration", 2*time.Minute, "how long the clients work while the nemesis strikes")
		seed      = fs.Uint64("seed", 1, "seed of the nemesis's schedule and the traffic")
		rate      = fs.Int("rate", 30, "purchases per second, per variant")
		multi     = fs.Float64("multi-share", chaos.DefaultMultiShare, "share of purchases for 2 or 3 units; the rest are for one")
		lockTTL   = fs.Duration("lock-ttl", 500*time.Millisecond, "lease TTL of the app instances; sizes the pauses, jumps and delays")
		lockWait  = fs.Duration("lock-wait", time.Second, "how long the app instances wait for a busy lock")
		workMS    = fs.Int("work-ms", 40, "business work inside every critical section, in milliseconds")
		instances = fs.Int("instances", 3, "app instances")
		nodes     = fs.Int("nodes", 5, "Redis nodes")
		appBin    = fs.String("app-bin", "", "storefront binary (default: go build the module found from the working directory)")
		batch     = fs.Bool("batch", false, "run every variant with batching under one lease on (the app's -batch)")
		fast      = fs.Bool("fast", true, "run the app instances with the locks' speed layer on; false runs exactly the taught code")
		aware     = fs.Bool("restart-aware", true, "run the app instances with Redlock restart awareness; false shows what it prevents")
		strict    = fs.Bool("strict", false, "also fail when a variant expected to break held")
		out       = fs.String("out", "out/chaos", "directory for chaos.json, chaos.html and the histories")
		verbose   = fs.Bool("v", false, "log what the runner and the nemesis do on stderr")
		check     = fs.String("check", "", "judge a kept run's directory again (its chaos.json, histories and database) instead of running")
	)
	if exit, ok := cli.Parse(fs, args, stderr); !ok {
		return exit
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *check != "" {
		rep, err := chaos.Recheck(ctx, *check)
		if err != nil {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
			return 2
		}
		if err := rep.WriteText(stdout); err != nil {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
			return 2
		}
		if rep.Failed(*strict) {
			return 1
		}
		return 0
	}
	rep, err := chaos.Run(ctx, chaos.Config{
		Variants: cli.Split(*variants), Faults: cli.Split(*faults), Duration: *duration, Seed: *seed, Rate: *rate, MultiShare: *multi,
		LockTTL: *lockTTL, LockWait: *lockWait, WorkMS: *workMS, OutDir: *out, Logger: logger, Batch: *batch, Taught: !*fast, Unaware: !*aware,
		Local: cluster.LocalConfig{Instances: *instances, Nodes: *nodes, AppBin: *appBin, Logger: logger},
	})
	if err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}
	rep.Command = "go run ./loadtest/cmd/chaos " + strings.Join(args, " ")
	if err := errors.Join(rep.WriteText(stdout), rep.WriteFiles(*out)); err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "\nwritten: %s/chaos.json, %s/chaos.html (histories: %s/env/history-app*.jsonl, client.jsonl, nemesis.jsonl)\n", *out, *out, *out)
	if rep.Failed(*strict) {
		return 1
	}
	return 0
}
