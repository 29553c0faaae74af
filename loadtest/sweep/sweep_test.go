package sweep

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/internal/machine"
	"flashsale/internal/testsupport"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/traffic"
)

// sampleSweep is a sweep with made-up figures: lua saturates at 400/s,
// redlock at 300/s, and one step failed.
func sampleSweep() *Report {
	r := &Report{
		Variants: []string{"none", "lua", "redlock"}, Rates: []int{200, 500, 1000},
		Duration: 5 * time.Second, WorkMS: 1, LockTTL: 500 * time.Millisecond, LockWait: time.Second,
		Instances: 3, Nodes: 5, Load: machine.Load{Cores: 2, LoadBefore: "1.00, 1.00, 1.00", LoadAfter: "2.00, 1.00, 1.00"},
	}
	sales := map[string][]float64{"none": {200, 500, 990}, "lua": {200, 400, 400}, "redlock": {200, 300, 330}}
	for _, v := range r.Variants {
		for i, rate := range r.Rates {
			st := Step{Variant: v, Rate: rate, Sales: sales[v][i], Unavailable: 100 * (1 - sales[v][i]/float64(rate))}
			st.Summary.Sent = float64(rate)
			st.Summary.P99 = time.Duration(i+1) * 300 * time.Millisecond
			if v == "none" && rate == 1000 {
				st.Err = "interrupted"
			}
			r.Steps = append(r.Steps, st)
		}
	}
	return r
}

// spikeSweep is a spike with made-up figures: lua holds its plateau and
// answers in time; redlock falls to a third at the peak, with late answers,
// and comes back slower.
func spikeSweep() *Report {
	r := &Report{Variants: []string{"lua", "redlock"}, Rates: []int{1000, 2000, 8000, 1000}, LockWait: time.Second}
	sales := map[string][]float64{"lua": {1000, 1800, 1700, 1000}, "redlock": {1000, 1500, 500, 1000}}
	p99 := map[string][]time.Duration{"lua": {20, 60, 300, 30}, "redlock": {20, 90, 2000, 50}}
	late := map[string][]int{"lua": {0, 0, 10, 0}, "redlock": {0, 0, 900, 0}}
	for _, v := range r.Variants {
		for i, rate := range r.Rates {
			st := Step{Variant: v, Rate: rate, Sales: sales[v][i], Late: late[v][i]}
			st.Summary.Counts.Requests = rate * 5
			st.Summary.P99 = p99[v][i] * time.Millisecond
			r.Steps = append(r.Steps, st)
		}
	}
	r.Steps[2].Cores = &Cores{Apps: 0.46, Runner: 0.55}
	r.Spikes = r.spikes()
	return r
}

func TestSpike(t *testing.T) {
	r := spikeSweep()
	if len(r.Spikes) != 2 {
		t.Fatalf("%d spikes, want one per variant", len(r.Spikes))
	}
	lua, rl := r.Spikes[0], r.Spikes[1]
	// lua: 1700 of a 1800 plateau; 10 late of 60 000; p99 30 ms after the
	// spike against 60 ms before it.
	if lua.PeakRate != 8000 || lua.Plateau != 1800 || lua.Ratio != 1700.0/1800 || lua.Late != 10 || lua.Requests != 60000 ||
		lua.Before != 60*time.Millisecond || lua.After != 30*time.Millisecond || !lua.Met {
		t.Errorf("lua spike %+v", lua)
	}
	if rl.Ratio != 500.0/1500 || rl.Recovery != 50.0/90 || rl.Met {
		t.Errorf("redlock spike %+v: want 0.33× its plateau, not met", rl)
	}
	// Rates that only rise have no spike.
	if s := sampleSweep().spikes(); s != nil {
		t.Errorf("spikes of a rising sweep: %+v", s)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"spike lua: 1700 sales/s at 8000/s = 0.94× its plateau of 1800", "late 900 of 60000", ": met", ": not met", "2000ms",
		"lua × 8000/s: cores: apps 0.46, runner 0.55"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	// The same rate twice is two steps, each with its own figures.
	if r.at(0, 0).Summary.P99 == r.at(0, 3).Summary.P99 {
		t.Error("the last 1000/s step reads as the first")
	}
	// What -spike fails on: a lock variant that missed; no lock is only
	// the reference, met or not.
	if got := r.Missed(); !slices.Equal(got, []string{"redlock"}) {
		t.Errorf("Missed() = %q, want [redlock]", got)
	}
	r.Spikes = append(r.Spikes, Spike{Variant: "none"})
	if got := r.Missed(); !slices.Equal(got, []string{"redlock"}) {
		t.Errorf("with none missing too, Missed() = %q, want [redlock]", got)
	}
}

// TestSpikeBeyondTheMachine: where the bare exchanges came late at the
// peak too, the late answers are not judged and the peak is held to
// BeyondWant; where they came in time, every target stands.
func TestSpikeBeyondTheMachine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bareLate int
		peak     float64 // redlock's sales/s at the peak, of a 1500 plateau
		beyond   bool
		missed   []string
	}{
		{"in time: 0.67× with late answers misses", 40, 1000, false, []string{"redlock"}},
		{"beyond: 0.67× holds, late answers not judged", 41, 1000, true, nil},
		{"beyond: 0.33× still misses", 41, 500, true, []string{"redlock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := spikeSweep()
			r.at(1, 2).Sales = tc.peak
			for i, rate := range r.Rates {
				st := Step{Variant: Bare, Rate: rate}
				st.Summary.Counts.Requests = rate * 5
				if i == 2 {
					st.Late = tc.bareLate // of 40 000: 0.1 % is 40
				}
				r.Bare = append(r.Bare, st)
			}
			r.Spikes = r.spikes()
			if rl := r.Spikes[1]; rl.Beyond != tc.beyond || rl.BareLate != tc.bareLate || rl.BareRequests != 40000 {
				t.Errorf("redlock spike %+v: want beyond %v", rl, tc.beyond)
			}
			if got := r.Missed(); !slices.Equal(got, tc.missed) {
				t.Errorf("Missed() = %q, want %q", got, tc.missed)
			}
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), "beyond this machine"); got != tc.beyond {
				t.Errorf("text says beyond the machine: %v, want %v:\n%s", got, tc.beyond, b.String())
			}
			if !strings.Contains(b.String(), Bare+"  ") {
				t.Errorf("text has no row for the bare exchange:\n%s", b.String())
			}
		})
	}
}

func TestSweepText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleSweep().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{"1000: sent/s", "sales/s", "redlock", "330", "20 %", "900ms", "ERROR", "load average 1.00, 1.00, 1.00 before"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

func TestSweepChartsAndPage(t *testing.T) {
	r := sampleSweep()
	for name, svg := range map[string]string{"sales": r.SalesChart(), "p99": r.P99Chart()} {
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("%s chart is not well-formed XML: %v", name, err)
				}
				break
			}
		}
		if n := strings.Count(svg, "<polyline"); n != len(r.Variants) {
			t.Errorf("%s chart: %d lines, want one per variant", name, n)
		}
	}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "1000/s offered", "error"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// A short sweep end to end: real instances, real nodes, two rates.
func TestSweep(t *testing.T) {
	testsupport.RequireRedis(t)
	if testing.Short() {
		t.Skip("the sweep builds and runs real app instances")
	}
	mod, err := cluster.FindModule(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results := t.TempDir()
	rep, err := Run(ctx, Config{
		Variants: []string{"none", "redlock"}, Rates: []int{50, 100}, Duration: time.Second, WarmUp: -1, OutDir: results,
		Local:  cluster.LocalConfig{ModuleDir: mod, Dir: t.TempDir()},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	if len(rep.Steps) != 4 {
		t.Fatalf("%d steps, want 4", len(rep.Steps))
	}
	// The cores each step used: the runner's own always, the instances'
	// from their metrics, where the platform reports them.
	var apps float64
	for _, st := range rep.Steps {
		if st.Cores == nil {
			if runtime.GOOS == "linux" {
				t.Errorf("%s × %d/s: no cores measured", st.Variant, st.Rate)
			}
			continue
		}
		if st.Cores.Runner <= 0 || st.Cores.Apps < 0 {
			t.Errorf("%s × %d/s: cores %+v, want the runner's above 0", st.Variant, st.Rate, *st.Cores)
		}
		apps += st.Cores.Apps
	}
	if runtime.GOOS == "linux" && apps <= 0 {
		t.Error("the instances used no CPU over four steps of orders")
	}
	for _, st := range rep.Steps {
		if st.Err != "" || st.Summary.Counts.Requests == 0 || st.Sales == 0 {
			t.Errorf("%s × %d/s: %d requests, %.0f sales/s, error %q", st.Variant, st.Rate, st.Summary.Counts.Requests, st.Sales, st.Err)
		}
		if st.Variant == "redlock" && (st.LostUpdates > 0 || len(st.CrossCheck) > 0) {
			t.Errorf("redlock × %d/s: %d lost updates, cross-check %v", st.Rate, st.LostUpdates, st.CrossCheck)
		}
		// Every lease holds the 1 ms of work at least, read from the
		// instances' metrics.
		if st.Variant == "redlock" && (st.Hold < time.Millisecond || st.HoldCeiling <= 0) {
			t.Errorf("redlock × %d/s: mean hold %v (ceiling %.0f/s), want at least the 1 ms of work", st.Rate, st.Hold, st.HoldCeiling)
		}
	}
	checkKept(t, rep)
	out := t.TempDir()
	if err := rep.WriteFiles(out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sweep.txt", "sweep.json", "sweep.html", "sweep-sales.svg", "sweep-p99.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

// checkKept: every step kept its vegeta results, one per request, and
// told its sales' latency apart; every variant that kept its updates has
// its capacity line, from a step it names, against the sweep's SLO.
func checkKept(t *testing.T, rep *Report) {
	t.Helper()
	for _, st := range rep.Steps {
		if n := countResults(t, st.ResultsFile); n != st.Summary.Counts.Requests {
			t.Errorf("%s × %d/s: %s holds %d results, the step counted %d", st.Variant, st.Rate, st.ResultsFile, n, st.Summary.Counts.Requests)
		}
		if sale := st.Summary.Latency[traffic.OutcomeSale]; sale.Count != st.Summary.Counts.Created-st.Summary.Counts.Replays || sale.P99 > sale.Max {
			t.Errorf("%s × %d/s: sale latency %+v for %d 201s", st.Variant, st.Rate, sale, st.Summary.Counts.Created)
		}
	}
	var capacity []string
	for _, c := range rep.Capacity {
		capacity = append(capacity, c.Variant)
		best := rep.Step(c.Variant, c.Offered)
		if best == nil || best.Sales != c.Sales || c.Met != rep.SLO.Met(best.Summary) || !strings.Contains(c.Line, rep.SLO.String()) {
			t.Errorf("capacity %+v is not its step's against the SLO %v", c, rep.SLO)
		}
	}
	if !slices.Contains(capacity, "redlock") {
		t.Errorf("no capacity line for redlock: %v", rep.Capacity)
	}
}

// countResults decodes a vegeta results file and counts its results.
func countResults(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := vegeta.NewDecoder(f)
	n := 0
	for {
		var r vegeta.Result
		if err := dec.Decode(&r); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("%s: %v", path, err)
			}
			return n
		}
		n++
	}
}

// The capacity is the highest offered rate whose step meets the SLO, not
// the step that sold most: a step that sells more by shedding a third of
// its buyers, or answering late, is past it. Where no step meets it, the
// line says so with the lowest rate's figures.
func TestCapacityMeetsTheSLO(t *testing.T) {
	step := func(rate int, sales float64, p99 time.Duration, shed int) Step {
		st := Step{Variant: "redlock", Rate: rate, Sales: sales}
		st.Summary.Counts.Requests = 100
		st.Summary.Latency = map[string]traffic.Percentiles{
			traffic.OutcomeSale: {Count: 100 - shed, P99: p99},
			traffic.OutcomeShed: {Count: shed},
		}
		return st
	}
	r := &Report{Variants: []string{"redlock"}, Rates: []int{200, 400, 800}, Load: machine.Load{LoadAfter: "1.00, 1.00, 1.00"}, Steps: []Step{
		step(200, 198, 40*time.Millisecond, 0),
		step(400, 390, 300*time.Millisecond, 1),
		step(800, 520, 900*time.Millisecond, 30), // sells most, past every target below
	}}
	cases := []struct {
		slo     string
		met     bool
		offered int
	}{
		{traffic.DefaultSLOFlag, true, 400},
		{"p99=100ms", true, 200},
		{"p99=1s,shed=50%", true, 800},
		{"p99=10ms", false, 200},
		{"p99=1s,shed=0", true, 200},
	}
	for _, tc := range cases {
		t.Run(tc.slo, func(t *testing.T) {
			slo, err := traffic.ParseSLO(tc.slo)
			if err != nil {
				t.Fatal(err)
			}
			got := r.capacities(slo)
			if len(got) != 1 {
				t.Fatalf("%d capacities, want 1", len(got))
			}
			c := got[0]
			if c.Met != tc.met || c.Offered != tc.offered || c.Sales != r.Step("redlock", tc.offered).Sales {
				t.Errorf("capacity %+v, want met %v at %d/s", c, tc.met, tc.offered)
			}
			if !strings.Contains(c.Line, slo.String()) || strings.Contains(c.Line, "at no rate") == tc.met {
				t.Errorf("line %q does not say which target was met, or whether", c.Line)
			}
		})
	}
}
