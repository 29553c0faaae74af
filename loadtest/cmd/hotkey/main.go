// Command hotkey measures the lock on one hot key the way a flash sale meets
// it: contenders spread over several OS processes, as over several app
// instances, where no process's own wait queue and direct hand-off can order
// the others. (lock/bench_test.go's BenchmarkHotKey runs every contender in
// one process, where they do.)
//
//	go run ./loadtest/cmd/hotkey                       # 1 and 4 processes, 32 contenders, lua, redlock, redlock+fence, redsync, 5 s a run
//	go run ./loadtest/cmd/hotkey -procs 1,2,4 -variants redlock -json out/hotkey.json
//
// The command starts five redis-server nodes on loopback and waits until
// they are older than the lease TTL + 1 s (a node younger than a TTL does not
// vote: restart awareness). For every split of the contenders and every
// variant it measures the variant's uncontended acquire+release, then
// re-executes itself as child processes that connect, warm up, say they are
// ready and, at a start time the parent gives them all at once, contend for
// one key with a fixed critical section until the end time. Each child
// reports every grant (its wait and its section's start and end on
// CLOCK_MONOTONIC, one clock for all processes) as JSON on stdout; the
// parent reports, per run: sections/s against the ceiling 1 / (section as it
// ran + uncontended acquire+release), the p50 and p99 wait, busiest/idlest
// process and client, and overlaps, the sections that began before another,
// from any process, had ended. Every process it starts is stopped by PID.
//
// Exit status: 0 when every run finished without an overlap, 1 when a
// correct lock let two holders overlap or a run failed, 2 on bad flags.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/cli"
	"flashsale/internal/clock"
	"flashsale/internal/localredis"
	"flashsale/internal/machine"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		code = childMain(ctx, os.Args[2:])
	} else {
		code = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// childMain runs one contender process and says why it failed on stderr.
func childMain(ctx context.Context, args []string) int {
	if err := runChild(ctx, args, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "hotkey child %d: %v\n", os.Getpid(), err)
		return 1
	}
	return 0
}

// settings are the benchmark's flags.
type settings struct {
	procs       []int
	goroutines  int
	variants    []string
	duration    time.Duration
	section     time.Duration
	ttl         time.Duration
	nodeTimeout time.Duration
	nodes       int
	jsonPath    string
}

// soloPairs is how many uncontended acquire+release pairs make the ceiling:
// enough that one slow pair does not move it.
const soloPairs = 200

// run is the whole command, callable from tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hotkey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		s        settings
		procs    = fs.String("procs", "1,4", "process counts to split the contenders over, comma-separated")
		variants = fs.String("variants", strings.Join([]string{lock.Lua, lock.Redlock, lock.RedlockFence, ladder.Redsync}, ","),
			"lock variants, comma-separated: "+strings.Join(ladder.Names(), ", ")+", or "+ladder.Redsync+" (the reference, with its defaults)")
		verbose = fs.Bool("v", false, "log what the benchmark does on stderr")
	)
	fs.IntVar(&s.goroutines, "goroutines", 32, "contenders in all, split evenly over the processes")
	fs.DurationVar(&s.duration, "duration", 5*time.Second, "how long every run contends")
	fs.DurationVar(&s.section, "section", time.Millisecond, "critical section of every grant")
	fs.DurationVar(&s.ttl, "ttl", 2*time.Second, "lease TTL (the lock's default)")
	fs.DurationVar(&s.nodeTimeout, "node-timeout", 0, "per-node timeout of the project's lock (0: its default, TTL/20 and at least 50 ms)")
	fs.IntVar(&s.nodes, "nodes", 5, "Redis nodes to start")
	fs.StringVar(&s.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hotkey [flags]\n\nMeasures the lock on one hot key with contenders in several OS processes.\n\n")
		fs.PrintDefaults()
	}
	if exit, ok := cli.Parse(fs, args, stderr); !ok {
		return exit
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "hotkey: "+format+"\n", a...)
		return 2
	}
	for p := range strings.SplitSeq(*procs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return bad("-procs: %q is not a process count", p)
		}
		if s.goroutines%n != 0 {
			return bad("-goroutines %d does not split evenly over %d processes", s.goroutines, n)
		}
		s.procs = append(s.procs, n)
	}
	for v := range strings.SplitSeq(*variants, ",") {
		v = strings.TrimSpace(v)
		if v != ladder.Redsync && !slices.Contains(ladder.Names(), v) {
			return bad("-variants: unknown variant %q", v)
		}
		s.variants = append(s.variants, v)
	}
	if s.duration <= 0 || s.section < 0 || s.ttl <= 0 || s.nodes < 1 || s.goroutines < 1 {
		return bad("-duration, -ttl, -nodes and -goroutines must be positive, -section not negative")
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	rep, err := bench(ctx, s, log)
	if rep != nil {
		rep.Command = "go run ./loadtest/cmd/hotkey " + strings.Join(args, " ")
		if werr := rep.WriteText(stdout); werr != nil {
			err = errors.Join(err, werr)
		}
		if s.jsonPath != "" {
			err = errors.Join(err, writeJSON(s.jsonPath, rep))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "hotkey: %v\n", err)
		return 1
	}
	for _, row := range rep.Rows {
		if row.Overlaps > 0 && row.Variant != ladder.None {
			fmt.Fprintf(stderr, "hotkey: %s let %d sections overlap across %d processes\n", row.Variant, row.Overlaps, row.Processes)
			return 1
		}
	}
	return 0
}

func writeJSON(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// bench starts the nodes and does every run. The report holds the runs done
// so far even when it fails.
func bench(ctx context.Context, s settings, log *slog.Logger) (*Report, error) {
	rep := &Report{Started: time.Now(), Contenders: s.goroutines, Section: s.section, Duration: s.duration,
		TTL: s.ttl, Nodes: s.nodes, CPUs: runtime.NumCPU(), LoadBefore: machine.LoadAverage()}
	defer func() { rep.LoadAfter = machine.LoadAverage() }()

	if !localredis.Available() {
		return nil, errors.New("redis-server is not on PATH: the contenders need real Redis nodes")
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cluster, err := localredis.Start(startCtx, s.nodes, localredis.Options{Logger: log})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("start %d redis nodes: %w", s.nodes, err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			log.Warn("stopping the redis nodes", "err", err)
		}
	}()
	born := time.Now()
	urls := strings.Join(cluster.URLs(), ",")
	nodes, err := parseNodes(urls)
	if err != nil {
		return nil, err
	}
	// A node younger than the TTL (and a little drift) does not vote: it
	// cannot tell a first start from a restart that lost its locks.
	log.Info("waiting for the nodes to age past the lease TTL", "ttl", s.ttl)
	if !clock.Sleep(ctx, time.Until(born.Add(s.ttl+time.Second))) {
		return nil, ctx.Err()
	}
	solo, err := newSolo(ctx, s, nodes, log)
	if err != nil {
		return nil, err
	}
	defer solo.close()

	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, procs := range s.procs {
		for _, v := range s.variants {
			uncontended, err := solo.measure(ctx, v)
			if err != nil {
				return rep, fmt.Errorf("%s uncontended: %w", v, err)
			}
			f := childFlags{
				variant: v, redis: urls, key: "hot", goroutines: s.goroutines / procs,
				namespace: fmt.Sprintf("hotkey:%s:%s:%d:", runID, v, procs),
				ttl:       s.ttl, nodeTimeout: s.nodeTimeout, section: s.section,
			}
			log.Info("run", "variant", v, "processes", procs, "per_process", f.goroutines, "uncontended", uncontended)
			reps, start, end, err := contenders(ctx, exe, f, procs, s.duration)
			if err != nil {
				return rep, fmt.Errorf("%s × %d processes: %w", v, procs, err)
			}
			rep.Rows = append(rep.Rows, aggregate(v, f.goroutines, reps, start, end, uncontended))
		}
	}
	return rep, nil
}

// contenders starts procs child processes, starts them all at once when
// every one is ready, and collects their reports. It stops every child it
// started, by PID, whatever happens.
func contenders(ctx context.Context, exe string, f childFlags, procs int, d time.Duration) (_ []childReport, start, end int64, err error) {
	// Setup (connect, vote, warm up) plus the run plus the slowest release.
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second+d)
	defer cancel()
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr *bytes.Buffer
	}
	var kids []*child
	defer func() {
		for _, k := range kids {
			k.stdin.Close() // a child whose stdin closes gives up
		}
		for _, k := range kids {
			done := make(chan struct{})
			go func() { _ = k.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = k.cmd.Process.Kill()
				<-done
			}
			if err != nil && k.stderr.Len() > 0 {
				err = fmt.Errorf("%w\nchild %d: %s", err, k.cmd.Process.Pid, strings.TrimSpace(k.stderr.String()))
			}
		}
	}()
	for range procs {
		cmd := exec.Command(exe, f.args()...)
		k := &child{cmd: cmd, stderr: &bytes.Buffer{}}
		cmd.Stderr = k.stderr
		if k.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, 0, 0, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, 0, 0, err
		}
		k.stdout = bufio.NewReader(out)
		if err := cmd.Start(); err != nil {
			return nil, 0, 0, fmt.Errorf("start a contender: %w", err)
		}
		kids = append(kids, k)
	}
	// Reading a child's stdout blocks; a context that ends unblocks it by
	// killing the children (by PID), which closes their pipes.
	stop := context.AfterFunc(ctx, func() {
		for _, k := range kids {
			_ = k.cmd.Process.Kill()
		}
	})
	defer stop()
	for _, k := range kids {
		line, err := k.stdout.ReadString('\n')
		if strings.TrimSpace(line) != readyLine {
			return nil, 0, 0, fmt.Errorf("contender %d did not get ready (%q): %w", k.cmd.Process.Pid, line, errors.Join(err, ctx.Err()))
		}
	}
	// Every child is connected and waiting: one start for all, far enough
	// ahead that the last one reads it in time.
	start = monoNow() + int64(100*time.Millisecond)
	end = start + int64(d)
	for _, k := range kids {
		if _, err := fmt.Fprintf(k.stdin, "%d %d\n", start, end); err != nil {
			return nil, 0, 0, fmt.Errorf("start contender %d: %w", k.cmd.Process.Pid, err)
		}
	}
	var reps []childReport
	for _, k := range kids {
		var r childReport
		if err := json.NewDecoder(k.stdout).Decode(&r); err != nil {
			return nil, 0, 0, fmt.Errorf("report of contender %d: %w", k.cmd.Process.Pid, errors.Join(err, ctx.Err()))
		}
		reps = append(reps, r)
	}
	return reps, start, end, nil
}

// solo measures uncontended acquire+release in the parent, on a key no
// contender uses, with the same lock code the contenders run.
type solo struct {
	ls    *lock.Client
	pairs map[string]pair
	close func()
}

func newSolo(ctx context.Context, s settings, nodes []*redis.Options, log *slog.Logger) (*solo, error) {
	const ns = "hotkey:solo:"
	ready, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ls, err := votingLockers(ready, nodes, ns, s.ttl, s.nodeTimeout, log, nil)
	if err != nil {
		return nil, err
	}
	rs, closeRs := redsyncOver(nodes)
	return &solo{
		ls:    ls,
		pairs: map[string]pair{ladder.Redsync: redsyncPair(rs, ns, s.ttl)},
		close: func() { _ = ls.Close(); closeRs() },
	}, nil
}

// measure is the mean uncontended acquire+release of variant, after a few
// unmeasured pairs that open the connections.
func (so *solo) measure(ctx context.Context, variant string) (time.Duration, error) {
	p, ok := so.pairs[variant]
	if !ok {
		l, err := so.ls.Locker(variant)
		if err != nil {
			return 0, err
		}
		p = lockPair(l)
		so.pairs[variant] = p
	}
	var total time.Duration
	for i := range soloPairs + 10 {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		t0 := time.Now()
		unlock, err := p(ctx, "solo")
		if err == nil {
			err = unlock(ctx)
		}
		cancel()
		if err != nil {
			return 0, err
		}
		if i >= 10 {
			total += time.Since(t0)
		}
	}
	return total / soloPairs, nil
}
