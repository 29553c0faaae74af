package loadtest_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/internal/testsupport"
	"flashsale/loadtest"
	"flashsale/loadtest/cluster"
)

var full = flag.Bool("loadtest.full", false, "run every cell of the matrix at the command's default size (minutes) instead of the short matrix")

// only narrows the short matrix to some of its cells, to rerun a column
// while working on it.
var only = flag.String("loadtest.only", "", "comma-separated cells (variant/scenario) of the short matrix to run alone")

// shortCells cover every column of the matrix with at least one cell that
// must hold and one that must break, on the variants that show the point
// of each column best. Together with the seed they keep the short run
// around two minutes on two cores.
var shortCells = []string{
	"none/clean", "redlock/clean",
	"setnx-expire/crash-between-steps", "lua/crash-between-steps",
	"get-del/pause-between-release-steps", "plain-del/pause-between-release-steps",
	"lua/pause-in-critical-section", "lua+fence/pause-in-critical-section",
	"redlock/pause-in-critical-section", "redlock+fence/pause-in-critical-section",
	"none/node-down", "redlock/node-down",
	"lua/node-restart", "redlock/node-restart",
	"redlock/node-restart-unaware",
	"lua/clock-jump", "redlock/clock-jump", "redlock+fence/clock-jump",
	"lua/network-delay", "redlock/network-delay",
	"redlock/partition",
	"attendee/clean", // the attendees' starter rung as shipped
	"lua/failover", "lua+fence/failover",
	"lua/long-work", "lua/long-work-watchdog",
	"lua+check/pause-in-critical-section", "lua+check/pause-after-lease-check", "lua+fence/pause-after-lease-check",
}

// knownBugs are cells where the storefront, not the runner, is wrong today.
// They are reported, not failed, so the suite stays usable until the fix;
// once fixed, delete the entry and the cell is asserted like any other.
// (They run with -loadtest.full; the short matrix leaves them out.)
var knownBugs = map[string]string{}

// The short matrix end to end: real redis-server nodes, three real app
// instances on one SQLite file, vegeta traffic, and every cell judged by
// the audit and the cross-check as docs/design.md expects.
func TestMatrix(t *testing.T) { runMatrix(t, shortCells, matrixMode{}) }

// taughtCells are the cells of the columns a workshop shows first, run with
// the locks' speed layer off (-fast=false): the broken rungs must break and
// the correct ones hold on exactly the code the rung files teach, as they
// do with it on.
var taughtCells = []string{
	"setnx-expire/crash-between-steps", "lua/crash-between-steps",
	"get-del/pause-between-release-steps", "plain-del/pause-between-release-steps",
	"lua/pause-in-critical-section", "lua+fence/pause-in-critical-section",
	"redlock/pause-in-critical-section", "redlock+fence/pause-in-critical-section",
	"redlock/node-restart-unaware", "redlock/node-restart",
}

// The key cells with the speed layer off.
func TestMatrixTaught(t *testing.T) { runMatrix(t, taughtCells, matrixMode{taught: true}) }

// withoutLockCells are the rungs that take no Redis lock, in the columns
// that test them hardest: a holder paused past its TTL, node 0 (redis-stock's
// node) restarted without its data, replies delayed past the TTL, clocks
// that jump. Each must hold.
var withoutLockCells = []string{
	"db-guard/clean", "db-guard/pause-in-critical-section", "db-guard/node-restart",
	"db-for-update/clean", "db-for-update/pause-in-critical-section", "db-for-update/node-restart",
	"redis-stock/clean", "redis-stock/pause-in-critical-section", "redis-stock/node-restart",
	"redis-stock/network-delay", "redis-stock/clock-jump",
}

// The rungs without a lock, end to end as the short matrix runs.
func TestMatrixWithoutLock(t *testing.T) { runMatrix(t, withoutLockCells, matrixMode{}) }

// batchCells are the key cells with batching under one lease on: the
// fenced rungs under a pause that outlasts the batch's lease, a correct
// rung with nothing to hide behind, and none, whose instances still race.
// The broken rungs' cells go either way (loadtest.ExpectedBatched); lua's
// pause and setnx-expire's crash show what they do.
var batchCells = []string{
	"none/clean", "redlock/clean",
	"lua+fence/pause-in-critical-section", "redlock+fence/pause-in-critical-section",
	"lua/pause-in-critical-section", "setnx-expire/crash-between-steps",
}

// The key cells end to end with every order batched under one lease.
func TestMatrixBatched(t *testing.T) { runMatrix(t, batchCells, matrixMode{batch: true}) }

// matrixMode is how runMatrix runs its cells: with batching under one lease
// (batch), with the locks' speed layer off (taught).
type matrixMode struct{ batch, taught bool }

// runMatrix runs cells (all of them with -loadtest.full) and judges each,
// in mode.
func runMatrix(t *testing.T, shortCells []string, mode matrixMode) {
	testsupport.RequireRedis(t)
	if testing.Short() {
		t.Skip("the matrix runs real app instances for about a minute")
	}
	mod, err := cluster.FindModule(".")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cfg := loadtest.Config{
		Rate:     200,
		Duration: 2 * time.Second,
		Seed:     1,
		Cells:    shortCells,
		Batch:    mode.batch,
		Taught:   mode.taught,
		OutDir:   out,
		Local:    cluster.LocalConfig{ModuleDir: mod, Dir: t.TempDir()},
		Logger:   testsupport.TestLog(t, slog.LevelWarn),
	}
	if *full {
		cfg.Cells, cfg.Rate, cfg.Duration = nil, 300, 4*time.Second
	}
	if *only != "" {
		cfg.Cells = strings.Split(*only, ",")
		for _, c := range cfg.Cells {
			if !slices.Contains(shortCells, c) {
				t.Fatalf("-loadtest.only: %q is not a cell of the short matrix", c)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := loadtest.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("matrix in %v:\n%s", time.Since(start).Round(time.Second), text.String())

	if !*full && len(rep.Cells) != len(cfg.Cells) {
		t.Errorf("%d cells ran, want %d", len(rep.Cells), len(cfg.Cells))
	}
	// A cell that broke where it must hold is evidence: it fails at once.
	// A cell that held where it must break, or could not be judged, only
	// lacks evidence — on a machine starved by other work the race may not
	// have happened (Redlock's 50 ms per-node timeout turns a starved node
	// into "unavailable", and then nobody gets in to collide). Those cells
	// get one more run, in a fresh environment, before they fail the test.
	var again []string
	for _, c := range rep.Cells {
		id := c.Variant + "/" + c.Scenario
		if _, known := knownBugs[id]; !known && c.Verdict != loadtest.VerdictOK && c.Verdict != loadtest.VerdictBug {
			again = append(again, id)
		}
	}
	if len(again) > 0 {
		t.Logf("no evidence yet for %v; running them once more", again)
		retry := cfg
		retry.Cells, retry.OutDir = again, t.TempDir()
		retry.Local.Dir = t.TempDir()
		rerun, err := loadtest.Run(ctx, retry)
		if err != nil {
			t.Fatal(err)
		}
		text.Reset()
		if err := rerun.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		t.Logf("second run:\n%s", text.String())
		for i, c := range rep.Cells {
			if rc := rerun.Cell(c.Variant, c.Scenario); rc != nil {
				rep.Cells[i] = *rc
			}
		}
	}
	for _, c := range rep.Cells {
		id := c.Variant + "/" + c.Scenario
		if why, known := knownBugs[id]; known {
			t.Logf("KNOWN STOREFRONT BUG %s: %s; this run: %s (%s)", id, why, c.Verdict, strings.Join(c.Reasons, "; "))
			continue
		}
		if c.Verdict != loadtest.VerdictOK {
			t.Errorf("%s: expected %s, saw %s: %s %s", id, c.Expected, c.Seen, c.Verdict, strings.Join(append(c.Reasons, c.Notes...), "; "))
		}
		checkLinear(t, id, c)
	}

	checkResults(t, rep)
	if err := rep.WriteFiles(out); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)<(script|img|iframe|link)[^>]*\s(src|href)\s*=`).Find(page); m != nil {
		t.Errorf("the HTML report loads something from elsewhere: %s", m)
	}
	if n := bytes.Count(page, []byte("<iframe")); n != len(rep.Scenarios) {
		t.Errorf("%d latency plots in the report, want one per scenario (%d)", n, len(rep.Scenarios))
	}
}

// checkLinear: porcupine checked the cell's history, agrees with the audit
// where the curriculum makes a claim, and a history that is not
// linearizable has its picture.
func checkLinear(t *testing.T, id string, c loadtest.Cell) {
	t.Helper()
	if c.Verdict == loadtest.VerdictSkipped || c.Verdict == loadtest.VerdictError {
		return
	}
	switch {
	case c.Linear == nil:
		t.Errorf("%s: its history was not checked", id)
	case c.Disagreement != "" && c.DisagreementDeclared != "":
		t.Logf("%s: the audit and porcupine disagree, as %s's design lets them (%s): %s", id, c.Variant, c.DisagreementDeclared, c.Disagreement)
	case c.Disagreement != "":
		t.Errorf("%s: the audit and porcupine disagree: %s", id, c.Disagreement)
	case c.Linearizable == nil:
		t.Logf("%s: porcupine ran out of time (%v): unknown, not a pass", id, c.Linear.Timeout)
	case !*c.Linearizable && c.HistoryFile == "":
		t.Errorf("%s: not linearizable (%v), but no picture of it", id, c.Linear.Illegal)
	}
}

// checkResults reads back vegeta's binary results of every cell, as the
// vegeta CLI would: one result per request, named after the variant.
func checkResults(t *testing.T, rep *loadtest.Report) {
	t.Helper()
	for _, c := range rep.Cells {
		if c.ResultsFile == "" {
			continue
		}
		f, err := os.Open(c.ResultsFile)
		if err != nil {
			t.Fatal(err)
		}
		dec := vegeta.NewDecoder(f)
		n := 0
		for {
			var r vegeta.Result
			if err := dec.Decode(&r); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Errorf("%s: %v", c.ResultsFile, err)
				}
				break
			}
			if r.Attack != c.Variant {
				t.Errorf("%s: attack %q, want the variant %q so plots overlay", c.ResultsFile, r.Attack, c.Variant)
				break
			}
			n++
		}
		f.Close()
		if n != c.Summary.Counts.Requests {
			t.Errorf("%s: %d results, the tally counted %d", c.ResultsFile, n, c.Summary.Counts.Requests)
		}
	}
}

var repeat = flag.Int("loadtest.repeat", 0, "run the breaking cells of the taught matrix this many times, seeds 1..N, and report how often each broke (minutes per run)")

// How reliably each "breaks" cell breaks with the speed layer off: every
// one must break in at least 19 of 20 seeded runs. About half a minute a
// run, so only on demand:
//
//	go test ./loadtest -run TestTaughtBreaksRepeatably -v -args -loadtest.repeat=20
func TestTaughtBreaksRepeatably(t *testing.T) {
	if *repeat == 0 {
		t.Skip("-loadtest.repeat=N runs it")
	}
	testsupport.RequireRedis(t)
	mod, err := cluster.FindModule(".")
	if err != nil {
		t.Fatal(err)
	}
	var breaking []string
	for _, c := range taughtCells {
		v, sc, _ := strings.Cut(c, "/")
		if want, _ := loadtest.Expected(v, sc); want == loadtest.Breaks {
			breaking = append(breaking, c)
		}
	}
	broke := map[string]int{}
	for seed := 1; seed <= *repeat; seed++ {
		rep, err := loadtest.Run(context.Background(), loadtest.Config{
			Rate: 200, Duration: 2 * time.Second, Seed: uint64(seed), Cells: breaking, Taught: true,
			OutDir: t.TempDir(), Local: cluster.LocalConfig{ModuleDir: mod, Dir: t.TempDir()},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rep.Cells {
			if c.Seen == loadtest.Breaks {
				broke[c.Variant+"/"+c.Scenario]++
			}
		}
		t.Logf("seed %d: %v", seed, broke)
	}
	for _, c := range breaking {
		t.Logf("%s broke in %d of %d runs", c, broke[c], *repeat)
		if broke[c]*20 < *repeat*19 {
			t.Errorf("%s broke in only %d of %d runs", c, broke[c], *repeat)
		}
	}
}
