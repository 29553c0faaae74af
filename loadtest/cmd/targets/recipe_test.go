package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/internal/testsupport"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
)

func TestMain(m *testing.M) { os.Exit(testsupport.Main(m)) }

// docs/loadtesting.md's recipe, line by line, against a real instance:
// the targets command through its run function, vegeta's attack and report
// through vegeta's library with the line's own flags (the vegeta command is
// not in this module's build list). The sale must sell: every 201 a
// distinct order the database has, never more than the stock, and every
// error code one the page's answer table explains.
func TestRecipe(t *testing.T) {
	testsupport.RequireRedis(t)
	if testing.Short() {
		t.Skip("starts a real app instance and attacks it for seconds")
	}
	mod, err := cluster.FindModule(".")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(mod, "docs", "loadtesting.md"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile("(?s)## The recipe.*?```sh\n(.*?)```").FindSubmatch(doc)
	if recipe == nil {
		t.Fatal("docs/loadtesting.md has no recipe block")
	}
	codes := answerCodes(string(doc))

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute) // the storefront is built first
	defer cancel()
	local, err := cluster.StartLocal(ctx, cluster.LocalConfig{Instances: 1, Nodes: 3, ModuleDir: mod, Dir: t.TempDir(),
		LockTTL: 2 * time.Second, LockWait: time.Second, Logger: testsupport.TestLog(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := local.Close(); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	env := map[string]string{}
	var answers traffic.Summary
	ran := 0
	for line := range strings.SplitSeq(string(recipe[1]), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		words := strings.Fields(os.Expand(line, func(k string) string { return env[k] }))
		out := ""
		if n := len(words); n > 2 && words[n-2] == ">" {
			out, words = filepath.Join(dir, words[n-1]), words[:n-2]
		}
		var stdout bytes.Buffer
		switch {
		case words[0] == "export":
			// The page's placeholders give way to the instance under test.
			env["FLASHSALE_URL"], env["FLASHSALE_ADMIN_TOKEN"] = local.Bases()[0], local.Token()
			continue
		case strings.HasPrefix(line, "go run ./loadtest/cmd/targets "):
			var stderr bytes.Buffer
			if code := run(ctx, inDir(dir, words[3:]), func(k string) string { return env[k] }, &stdout, &stderr); code != 0 {
				t.Fatalf("%s: exit %d: %s", line, code, stderr.String())
			}
			if slices.Contains(words, "-answers") {
				if err := json.Unmarshal(stdout.Bytes(), &answers); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
			}
		case strings.HasPrefix(line, "vegeta attack "):
			attack(ctx, t, dir, words[2:], &stdout)
		case strings.HasPrefix(line, "vegeta report "):
			report(t, inDir(dir, words[2:]), &stdout)
		default:
			t.Fatalf("the recipe has a line this test does not run: %s", line)
		}
		if out != "" {
			if err := os.WriteFile(out, stdout.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ran++
		if out == "" { // a file written is for the next line, not the log
			t.Logf("$ %s\n%s", line, clip(stdout.String()))
		}
	}
	if ran < 4 {
		t.Fatalf("only %d commands of the recipe ran", ran)
	}

	audit, err := storefront.API{Base: local.Bases()[0], Token: local.Token()}.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := answers.Counts
	t.Logf("%d requests: %d sold (%d/s), answers %v, audit %d orders of %d units", c.Requests, answers.Sales, int(answers.SalesPerSecond), c.ByError, audit.Orders, audit.SoldUnits)
	switch {
	case c.Requests == 0 || answers.Sales == 0:
		t.Fatalf("the recipe sold nothing: %+v", c)
	case c.Transport > 0:
		t.Errorf("%d requests got no answer", c.Transport)
	case !audit.OK || audit.Orders != int64(answers.Sales) || audit.SoldUnits != answers.ConfirmedUnits:
		t.Errorf("the audit %+v does not match the %d orders and %d units the answers confirmed", audit, answers.Sales, answers.ConfirmedUnits)
	case answers.Sales > 500 || c.Replays > 0 || c.Created != answers.Sales:
		t.Errorf("%d sales (%d 201s, %d replays) from a stock of 500 and distinct keys", answers.Sales, c.Created, c.Replays)
	}
	if p := answers.Latency[traffic.OutcomeSale]; p.Count != answers.Sales || p.P50 <= 0 || p.P50 > p.P99 || p.P99 > p.Max {
		t.Errorf("latency of sales %+v for %d sales", p, answers.Sales)
	}
	// The page's attack offers more orders than the stock: once a sold_out
	// came back, the answers say when, and the sale rate until then.
	if c.ByError["sold_out"] > 0 && (answers.StockRanOut <= 0 || answers.StockRanOut > answers.Duration || answers.SalesPerSecondInStock <= 0) {
		t.Errorf("%d sold_out answers, yet the stock ran out after %v of %v at %.1f sales/s", c.ByError["sold_out"], answers.StockRanOut, answers.Duration, answers.SalesPerSecondInStock)
	}
	if rate := attackRate(string(recipe[1])); answers.Offered != float64(rate) || answers.Sent <= 0 {
		t.Errorf("offered %.0f/s, sent %.0f/s; the recipe's attack offers %d/s", answers.Offered, answers.Sent, rate)
	}
	for code := range c.ByError {
		if !codes[code] {
			t.Errorf("the recipe got %q, which docs/loadtesting.md's answer table does not explain", code)
		}
	}
}

// attackRate is the -rate of the recipe's vegeta attack.
func attackRate(recipe string) int {
	m := regexp.MustCompile(`vegeta attack .*-rate=(\d+)`).FindStringSubmatch(recipe)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1]) // \d+ is a number
	return n
}

// inDir makes the file arguments of a recipe line paths in dir.
func inDir(dir string, args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if name, v, ok := strings.Cut(a, "="); ok && name == "-targets" {
			out[i] = name + "=" + filepath.Join(dir, v)
		} else if strings.HasSuffix(a, ".bin") || strings.HasSuffix(a, ".json") {
			out[i] = filepath.Join(dir, a)
		}
	}
	return out
}

// attack is `vegeta attack` with the flags the recipe gives it.
func attack(ctx context.Context, t *testing.T, dir string, args []string, w io.Writer) {
	t.Helper()
	fs := flag.NewFlagSet("attack", flag.ContinueOnError)
	format := fs.String("format", "http", "")
	targets := fs.String("targets", "stdin", "")
	rate := fs.Int("rate", 50, "")
	duration := fs.Duration("duration", 0, "")
	workers := fs.Uint64("max-workers", vegeta.DefaultMaxWorkers, "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		t.Fatalf("vegeta attack %v: %v", args, err)
	}
	if *format != "json" || *duration <= 0 || *duration > 10*time.Second || *rate*int(duration.Seconds()) > 5000 {
		t.Fatalf("vegeta attack %v: want -format=json and a bounded attack", args)
	}
	src, err := os.ReadFile(filepath.Join(dir, *targets))
	if err != nil {
		t.Fatal(err)
	}
	atk := vegeta.NewAttacker(vegeta.MaxWorkers(*workers))
	enc := vegeta.NewEncoder(w)
	tr := vegeta.NewJSONTargeter(bytes.NewReader(src), nil, nil)
	// vegeta loops over a targets file it has read to the end: read it
	// once, then serve its targets round-robin, as the command does.
	all, err := vegeta.ReadAllTargets(tr)
	if err != nil {
		t.Fatal(err)
	}
	for r := range atk.Attack(vegeta.NewStaticTargeter(all...), vegeta.Rate{Freq: *rate, Per: time.Second}, *duration, "recipe") {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			atk.Stop()
		}
	}
}

// report is `vegeta report` of a results file: its text report.
func report(t *testing.T, args []string, w io.Writer) {
	t.Helper()
	if len(args) != 1 {
		t.Fatalf("vegeta report %v: want one results file", args)
	}
	f, err := os.Open(args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var m vegeta.Metrics
	dec := vegeta.NewDecoder(f)
	for {
		var r vegeta.Result
		if err := dec.Decode(&r); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		m.Add(&r)
	}
	m.Close()
	if err := vegeta.NewTextReporter(&m).Report(w); err != nil {
		t.Fatal(err)
	}
}

// answerCodes are the error codes of the page's answer table.
func answerCodes(doc string) map[string]bool {
	table := regexp.MustCompile("(?s)## The answers\n\n(.*?)\n\n").FindStringSubmatch(doc)
	out := map[string]bool{}
	if table == nil {
		return out
	}
	for _, row := range regexp.MustCompile("(?m)^\\| \\d{3} \\| (.*?) \\|").FindAllStringSubmatch(table[1], -1) {
		for _, c := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row[1], -1) {
			out[c[1]] = true
		}
	}
	return out
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// The k6 script carries the sale's settings and a key per iteration; its
// options parse as JSON, with the SLO's thresholds on metrics the script
// declares, and a Trend for every outcome, so sales and sold-outs are
// timed apart.
func TestK6Script(t *testing.T) {
	var out, stderr bytes.Buffer
	args := []string{"-format", "k6", "-rate", "300", "-duration", "7s", "-tag", "k", "-variant", "lua", "-slo", "p99=250ms,shed=2%"}
	if code := run(context.Background(), args, func(string) string { return "" }, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	script := out.String()
	for _, want := range []string{`"k" + '-' + exec.scenario.iterationInTest`, `'X-Lock-Variant': "lua"`, "expectedStatuses(201, 409)"} {
		if !strings.Contains(script, want) {
			t.Errorf("the k6 script lacks %q:\n%s", want, script)
		}
	}
	m := regexp.MustCompile(`(?s)export const options = (\{.*?\n\});`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("the k6 script has no options object:\n%s", script)
	}
	var opts struct {
		Scenarios map[string]struct {
			Executor string `json:"executor"`
			Rate     int    `json:"rate"`
			Duration string `json:"duration"`
			MaxVUs   int    `json:"maxVUs"`
		} `json:"scenarios"`
		Thresholds map[string][]string `json:"thresholds"`
	}
	if err := json.Unmarshal([]byte(m[1]), &opts); err != nil {
		t.Fatalf("the options are not JSON: %v\n%s", err, m[1])
	}
	if sc := opts.Scenarios["sale"]; sc.Executor != "constant-arrival-rate" || sc.Rate != 300 || sc.Duration != "7s" || sc.MaxVUs <= 0 {
		t.Errorf("scenario %+v, want an open model at 300/s for 7s", sc)
	}
	declared := map[string]string{}
	for _, d := range regexp.MustCompile(`new (Trend|Rate|Counter)\('([a-z_]+)'`).FindAllStringSubmatch(script, -1) {
		declared[d[2]] = d[1]
	}
	for _, o := range traffic.Outcomes {
		if declared["flashsale_"+o+"_duration"] != "Trend" {
			t.Errorf("no Trend for the outcome %s (declared: %v)", o, declared)
		}
	}
	want := map[string][]string{"flashsale_sale_duration": {"p(99)<=250"}, "flashsale_shed": {"rate<=0.02"}}
	for metric, th := range want {
		if !slices.Equal(opts.Thresholds[metric], th) {
			t.Errorf("threshold of %s: %q, want %q (the SLO)", metric, opts.Thresholds[metric], th)
		}
	}
	for metric := range opts.Thresholds {
		if declared[metric] == "" {
			t.Errorf("a threshold on %s, which the script does not declare", metric)
		}
	}
}
