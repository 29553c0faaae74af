// Command opfuzz searches operator actions for a double grant of the lock:
// it starts five redis-server nodes per run, lock holders as child
// processes (this command run again as "opfuzz holder …"), and a seeded
// sequence of operator actions, and reports every two holders inside their
// validity (package flashsale/loadtest/opfuzz). A failing sequence is
// shrunk and printed for -replay.
//
//	opfuzz -seed 7 -duration 10m -out report.json
//	opfuzz -replay 'holder redlock 6s; holder redlock 1s; restart 0 wipe' -runs 20
//	opfuzz -replay '…' -shrink -shrink-runs 3 -shrink-budget 30
//
// It exits 1 when a run gave a double grant the store would not survive.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/cli"
	"flashsale/loadtest/opfuzz"
)

// holderCommand is the hidden first argument that makes the binary one
// holder process.
const holderCommand = "holder"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A restarted node makes every go-redis client print its dial errors
	// several times a second: the runs say what failed themselves.
	redis.SetLogger(quietRedis{})
	var code int
	if len(os.Args) > 1 && os.Args[1] == holderCommand {
		if err := opfuzz.HolderMain(ctx, os.Args[2:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "opfuzz holder %d: %v\n", os.Getpid(), err)
			code = 1
		}
	} else {
		code = run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

// Printf drops the line.
func (quietRedis) Printf(context.Context, string, ...any) {}

// run is the whole command, callable from tests.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("opfuzz", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg  opfuzz.Config
		so   opfuzz.SearchOptions
		keys = fs.String("keys", "k", "keys every holder tries, comma-separated")
		ops  = fs.String("ops", "", "draw only these ops, comma-separated (default: every op)")
		rep  = fs.String("replay", "", "run this sequence instead of searching (actions separated by ';')")
		runs = fs.Int("runs", 1, "with -replay: how many times to run it")
		out  = fs.String("out", "", "write the JSON report to this file (during a search, after every sequence too)")
		js   = fs.Bool("json", false, "print the JSON report on stdout (the summary goes to stderr)")
		v    = fs.Bool("v", false, "log what the runs do on stderr")
		hlog = fs.String("holder-log", "", "copy the holders' lock log from this level (debug, info, warn) to stderr")
	)
	fs.Int64Var(&so.Seed, "seed", 1, "seed of the first sequence (sequence i has seed+i)")
	fs.DurationVar(&so.Duration, "duration", 45*time.Second, "how long to search (a run under way, and the shrinking of a finding, finish)")
	fs.IntVar(&so.Sequences, "sequences", 0, "at most this many sequences (0: until -duration)")
	fs.IntVar(&so.ShrinkRuns, "shrink-runs", 2, "runs of a candidate before the shrinker takes it to pass (0: no shrinking)")
	fs.IntVar(&so.ShrinkBudget, "shrink-budget", 16, "candidates the shrinker tries at most per finding")
	fs.IntVar(&so.Parallel, "parallel", 1, "sequences run at once, each on five nodes of its own")
	fs.BoolVar(&so.Steer, "steer", true, "keep the sequences whose runs reach a new signal (what the holders' lock logs, what the oracle sees) and mutate them")
	shrinkIt := fs.Bool("shrink", false, "with -replay: shrink the sequence (-shrink-runs, -shrink-budget) instead of replaying it")
	fs.BoolVar(&so.StopAtFirst, "stop-at-first", false, "stop the search at the first double grant")
	fs.BoolVar(&cfg.NoContender, "no-contender", false, "no client taking the last two nodes between leases (leases then rarely hold a bare quorum)")
	fs.BoolVar(&cfg.AwarenessOff, "awareness-off", false, "holders without restart awareness (to see the search find what it prevents)")
	fs.BoolVar(&cfg.AppACL, "app-acl", getenv("OPFUZZ_APP_ACL") == "1", "start the nodes with the app's ACL (the default user off): the holders run as the app's user, the operator's actions as the admin (env OPFUZZ_APP_ACL=1)")
	fs.StringVar(&cfg.User, "user", getenv("OPFUZZ_USER"), "Redis user of the holders, the app's (env OPFUZZ_USER; default: the default user); password in env OPFUZZ_PASSWORD")
	fs.StringVar(&cfg.AdminUser, "admin-user", getenv("OPFUZZ_ADMIN_USER"), "Redis user of the operator's actions (env OPFUZZ_ADMIN_USER; default: one the run creates); password in env OPFUZZ_ADMIN_PASSWORD")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: opfuzz [flags]\n\nSearches sequences of operator actions on five Redis nodes for a double grant of the lock.\n\n")
		fs.PrintDefaults()
	}
	if exit, ok := cli.Parse(fs, args, stderr); !ok {
		return exit
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "opfuzz: "+format+"\n", a...)
		return 2
	}
	cfg.Password, cfg.AdminPassword, cfg.Keys = getenv("OPFUZZ_PASSWORD"), getenv("OPFUZZ_ADMIN_PASSWORD"), cli.Split(*keys)
	if *ops != "" {
		for _, op := range cli.Split(*ops) {
			if _, ok := opfuzz.Ops[op]; !ok {
				return bad("-ops: unknown op %q", op)
			}
			so.Space.Ops = append(so.Space.Ops, op)
		}
	}
	if *runs < 1 || so.Duration <= 0 {
		return bad("-runs and -duration must be positive")
	}
	exe, err := os.Executable()
	if err != nil {
		return bad("cannot find this program to run holders: %v", err)
	}
	cfg.Holder = opfuzz.HolderCommand(exe, []string{holderCommand}, cfg.Password)
	cfg.Signals = so.Steer
	level := slog.LevelWarn
	if *v {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *hlog != "" {
		cfg.HolderLog, cfg.HolderLogLevel = stderr, *hlog
	}
	rn := opfuzz.NewRunner(ctx, cfg, slices.Max(opfuzz.DefaultSpace.TTLs))
	defer rn.Close()
	write := func(report opfuzz.Report) error {
		if *out == "" {
			return nil
		}
		b, _ := json.MarshalIndent(report, "", "  ")
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	// A long search keeps its report on disk as it grows.
	so.Progress = func(r opfuzz.Report) { _ = write(r) }
	var report opfuzz.Report
	if *rep != "" {
		seq, err := opfuzz.Parse(*rep, 5)
		if err != nil {
			return bad("-replay: %v", err)
		}
		if *shrinkIt {
			shrunk, n := opfuzz.ShrinkOn(ctx, rn, seq, max(so.ShrinkRuns, 1), so.ShrinkBudget)
			fmt.Fprintf(stdout, "shrunk in %d runs: -replay '%s'\n", n, shrunk)
			return 0
		}
		report, err = opfuzz.Replay(ctx, rn, seq, *runs)
		if err != nil {
			return bad("%v", err)
		}
	} else if report, err = opfuzz.Search(ctx, rn, so); err != nil {
		return bad("%v", err)
	}
	summary := stdout
	if *js {
		summary = stderr
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return bad("%v", err)
		}
	}
	fmt.Fprint(summary, report.Summary())
	if err := write(report); err != nil {
		return bad("-out: %v", err)
	}
	if report.Failed > 0 {
		return 1
	}
	return 0
}
