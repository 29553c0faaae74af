// Command loadtest runs flashsale's lock variants × fault scenarios matrix
// with vegeta and judges every cell against the expected outcomes declared in the curriculum (curriculum/table.go).
//
//	go run ./loadtest/cmd/loadtest                 # the full matrix, on its own Redis nodes and 3 app instances
//	go run ./loadtest/cmd/loadtest -quick          # a few seconds a cell
//	go run ./loadtest/cmd/loadtest -targets http://127.0.0.1:8080 -admin-token T -scenarios clean
//	go run ./loadtest/cmd/loadtest -variants attendee -judge-as lua -strict   # is the rung you wrote right yet?
//	go run ./loadtest/cmd/loadtest -sweep          # one hot SKU at 200, 500, 1000 req/s for none, lua, redlock, redlock+fence
//	go run ./loadtest/cmd/loadtest -sweep -batch -db postgres://…   # the same with orders batched under one lease, on PostgreSQL
//
// Exit status: 0 when every cell did what the curriculum (curriculum/table.go) expects; 1 when a cell
// that must hold broke, a cell could not be judged, or (with -strict) a cell
// that must break held; 2 when the run could not start.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"flashsale/internal/cli"
	"flashsale/loadtest"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/sweep"
	"flashsale/loadtest/traffic"
)

func main() {
	// The runner shares the machine with the instances it measures, and at
	// a spike's peak it allocates for thousands of requests and results a
	// second: collecting its garbage a quarter as often leaves more of the
	// cores to the instances (docs/performance.md).
	cli.LessGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command, callable from tests.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		variants    = fs.String("variants", "all", "lock variants to run, comma-separated: "+strings.Join(loadtest.Variants, ", "))
		scenarios   = fs.String("scenarios", "all", "scenarios to run, comma-separated: "+strings.Join(loadtest.ScenarioNames(), ", "))
		cells       = fs.String("cells", "", "run only these cells, comma-separated variant/scenario (e.g. redlock/node-down)")
		rate        = fs.Int("rate", 300, "requests per second of every attack")
		duration    = fs.Duration("duration", 4*time.Second, "how long every attack lasts")
		maxRequests = fs.Uint64("max-requests", 0, "request cap of every attack (0: rate × duration)")
		maxWorkers  = fs.Uint64("max-workers", 128, "most requests in flight")
		seed        = fs.Uint64("seed", 1, "seed of the traffic and the faults")
		quick       = fs.Bool("quick", false, "the short matrix: 200 req/s for 1.5s a cell (explicit -rate/-duration win)")
		multiShare  = fs.Float64("multi-share", loadtest.DefaultMultiShare, "share of orders for 2 or 3 units; the rest are for one")
		checkTO     = fs.Duration("check-timeout", loadtest.DefaultCheckTimeout, "most time porcupine may take to check one cell's history for linearizability; one that runs out is unknown, never a pass")
		judgeAs     = fs.String("judge-as", "", "judge every cell against this variant's expected outcomes instead of its own (a rung being written: -variants attendee -judge-as lua)")
		strict      = fs.Bool("strict", false, "also fail when a cell that must break held (the workshop guarantee)")
		out         = fs.String("out", "out/loadtest", "directory for report.{txt,json,html}, the charts and vegeta's results per cell")
		progress    = fs.Bool("progress", isTerminal(os.Stderr), "draw a progress bar per cell on stderr (default: when stderr is a terminal)")
		verbose     = fs.Bool("v", false, "log what the runner does on stderr")

		lockTTL     = fs.Duration("lock-ttl", 500*time.Millisecond, "lease TTL of the app instances; sizes the pause faults and node recipes")
		lockWait    = fs.Duration("lock-wait", time.Second, "how long the app instances wait for a busy lock")
		instances   = fs.Int("instances", 3, "app instances to start (K)")
		nodes       = fs.Int("nodes", 5, "Redis nodes to start")
		appBin      = fs.String("app-bin", "", "storefront binary to run (default: go build the module found from the working directory)")
		module      = fs.String("module", "", "flashsale module root to build from (default: found from the working directory)")
		fast        = fs.Bool("fast", true, "the locks' speed layer in every cell; false runs exactly the taught code (retry after a random delay, each rung's own release), with the same expected outcomes")
		batch       = fs.Bool("batch", false, "run every cell (every -sweep step) with batching under one lease on; the cells are judged as batching expects (the broken rungs' breaks become either way); off, it is off everywhere")
		dbURL       = fs.String("db", "", "database of the instances started: empty for a SQLite file beside the logs, or a postgres:// URL (its tables are reset every cell)")
		watchdog    = fs.Bool("watchdog", false, "turn the lease watchdog on in every cell (long-work is then judged as long-work-watchdog); off, only long-work-watchdog has it")
		appArgs     = fs.String("app-args", "", "storefront arguments added to every instance started, space-separated (for example \"-max-in-flight 384 -batch-max 384\"); FLASHSALE_* variables in the runner's environment are not passed on")
		unawareArgs = fs.String("unaware-args", strings.Join(cluster.DefaultUnawareArgs, " "), "storefront arguments that turn Redlock restart awareness off")

		targets     = fs.String("targets", "", "base URLs of running instances to attack instead (comma-separated, loopback only); node scenarios are then skipped")
		adminToken  = fs.String("admin-token", getenv("FLASHSALE_ADMIN_TOKEN"), "admin token of -targets (env FLASHSALE_ADMIN_TOKEN)")
		redisURLs   = fs.String("redis", "", "Redis URLs of -targets, comma-separated, for the runner's own stuck-lock scan")
		lockPattern = fs.String("lock-pattern", cluster.DefaultLockPattern, "Redis key pattern of lock keys")

		sweepOn    = fs.Bool("sweep", false, "instead of the matrix, offer rising rates of purchases of one hot SKU to every variant (default variants "+strings.Join(sweep.Variants, ",")+", 5s a rate)")
		sweepRates = fs.String("sweep-rates", "200,500,1000", "offered rates of -sweep, requests per second, comma-separated")
		sweepWork  = fs.Int("sweep-work-ms", 1, "business work inside every critical section of -sweep, ms")
		sloFlag    = fs.String("slo", traffic.DefaultSLOFlag, "the target of -sweep's capacity line: the highest offered rate whose p99 of the sales alone and percent of requests shed (503, 429) meet it")
		scaleOn    = fs.Bool("scale", false, "instead of the matrix, the scale run: sales/s and p99 by hot SKUs, app instances and Redis nodes for "+strings.Join(sweep.ScaleVariants, ",")+", with and without -batch, beside the store's own ceiling; writes scale.{txt,json,html} and the plots")
		scaleSKUs  = fs.String("scale-skus", "1,10,100,1000", "hot SKUs of -scale, comma-separated")
		scaleApps  = fs.String("scale-instances", "1,2,3,6", "app instances of -scale, comma-separated")
		scaleNodes = fs.String("scale-nodes", "3,5,7", "Redis nodes of -scale, comma-separated")
		scaleRate  = fs.Int("scale-rate", 400, "offered rate of every -scale point, requests per second")
		scalePG    = fs.String("scale-postgres", "", "PostgreSQL server of -scale (it makes a schema of its own there and drops it), e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable; empty: SQLite alone")
		scaleImg   = fs.String("scale-img", "", "directory the plots of -scale are also written to (e.g. docs/img)")
		redraw     = fs.String("scale-redraw", "", "draw the plots of an earlier -scale run again from its scale.json into -scale-img, measuring nothing")
		spike      = fs.Bool("spike", false, "the flash-sale spike: -sweep -batch at "+cli.Join(sweep.SpikeRates)+"/s for "+strings.Join(sweep.SpikeVariants, ",")+" (flags given win); exits 1 when a lock variant misses a spike target")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: loadtest [flags]\n\nRuns every lock variant under every fault scenario with vegeta and judges each cell against the expected outcomes declared in the curriculum (curriculum/table.go).\n\n")
		fs.PrintDefaults()
	}
	if exit, ok := cli.Parse(fs, args, stderr); !ok {
		return exit
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["rate"] {
			*rate = 200
		}
		if !set["duration"] {
			*duration = 1500 * time.Millisecond
		}
	}

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := loadtest.Config{
		Variants:     cli.Split(*variants),
		Scenarios:    cli.Split(*scenarios),
		Cells:        cli.Split(*cells),
		JudgeAs:      *judgeAs,
		Rate:         *rate,
		Duration:     *duration,
		MaxRequests:  *maxRequests,
		MaxWorkers:   *maxWorkers,
		Seed:         *seed,
		CheckTimeout: *checkTO,
		LockTTL:      *lockTTL,
		Watchdog:     *watchdog,
		Taught:       !*fast,
		Batch:        *batch,
		Targets:      cli.Split(*targets),
		AdminToken:   *adminToken,
		RedisURLs:    cli.Split(*redisURLs),
		LockPattern:  *lockPattern,
		Local: cluster.LocalConfig{
			Instances:   *instances,
			Nodes:       *nodes,
			AppBin:      *appBin,
			ModuleDir:   *module,
			LockTTL:     *lockTTL,
			LockWait:    *lockWait,
			ExtraArgs:   strings.Fields(*appArgs),
			UnawareArgs: strings.Fields(*unawareArgs),
			DB:          *dbURL,
			Logger:      logger,
		},
		OutDir: *out,
		Logger: logger,
	}
	if len(cfg.Targets) > 0 {
		// Running instances say their own lease TTL and lock wait (GET
		// /api); a flag's default must not stand in for them, only a value
		// given on purpose, which the run then checks against theirs.
		if !set["lock-ttl"] {
			cfg.LockTTL = 0
		}
		if set["lock-wait"] {
			cfg.LockWait = *lockWait
		}
	}
	if *progress {
		cfg.Progress = stderr
	}
	if set["multi-share"] {
		if *multiShare < 0 || *multiShare > 1 {
			fmt.Fprintf(stderr, "loadtest: -multi-share %v is not a share between 0 and 1\n", *multiShare)
			return 2
		}
		m := loadtest.DefaultMix()
		m.MultiShare = *multiShare
		cfg.Mix = &m
	}
	if *out != "" {
		// The local environment (binary, database, logs) lives beside the
		// results, so a surprising cell can be looked into afterwards.
		cfg.Local.Dir = filepath.Join(*out, "env")
		if err := os.RemoveAll(filepath.Join(*out, "results")); err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return 2
		}
	}

	if *spike {
		*sweepOn = true
		if !set["batch"] {
			cfg.Batch = true
		}
		if !set["sweep-rates"] {
			*sweepRates = cli.Join(sweep.SpikeRates)
		}
		if !set["variants"] {
			cfg.Variants, set["variants"] = sweep.SpikeVariants, true
		}
	}
	if *scaleOn || *redraw != "" {
		sf := scaleFlags{skus: *scaleSKUs, instances: *scaleApps, nodes: *scaleNodes, rate: *scaleRate, postgres: *scalePG, img: *scaleImg, redraw: *redraw, workMS: *sweepWork}
		return runScale(ctx, cfg, set, sf, args, stdout, stderr)
	}
	if *sweepOn {
		slo, err := traffic.ParseSLO(*sloFlag)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return 2
		}
		return runSweep(ctx, cfg, set, sweepFlags{rates: *sweepRates, workMS: *sweepWork, spike: *spike, slo: slo}, args, stdout, stderr)
	}
	rep, err := loadtest.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 2
	}
	rep.Command = "go run ./loadtest/cmd/loadtest " + strings.Join(args, " ")
	if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 2
	}
	if *out != "" {
		if err := rep.WriteFiles(*out); err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "\nwritten: %s (report.txt, report.json, report.html, oversold.svg, lost-updates.svg; vegeta results under results/<scenario>/<variant>.bin%s)\n", *out, logsNote(cfg))
	}
	if rep.Failed(*strict) {
		return 1
	}
	return 0
}

// logsNote names the app logs' folder when the run started the instances
// that write it; running instances keep their logs wherever they were
// started.
func logsNote(cfg loadtest.Config) string {
	if len(cfg.Targets) > 0 {
		return ""
	}
	return "; app logs under env/logs"
}

// isTerminal reports whether f is a character device: progress bars
// redraw with carriage returns, which only a terminal makes readable.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
