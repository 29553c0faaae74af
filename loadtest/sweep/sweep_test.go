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
	"strings"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/loadtest/cluster"
)

// sampleSweep is a sweep with made-up figures: lua saturates at 400/s,
// redlock at 300/s, and one step failed.
func sampleSweep() *Report {
	r := &Report{
		Variants: []string{"none", "lua", "redlock"}, Rates: []int{200, 500, 1000},
		Duration: 5 * time.Second, WorkMS: 1, LockTTL: 500 * time.Millisecond, LockWait: time.Second,
		Instances: 3, Nodes: 5, LoadBefore: "1.00, 1.00, 1.00", LoadAfter: "2.00, 1.00, 1.00",
	}
	sales := map[string][]float64{"none": {200, 500, 990}, "lua": {200, 400, 400}, "redlock": {200, 300, 330}}
	for _, v := range r.Variants {
		for i, rate := range r.Rates {
			st := Step{Variant: v, Rate: rate, Sales: sales[v][i], Unavailable: 100 * (1 - sales[v][i]/float64(rate))}
			st.Summary.Rate = float64(rate)
			st.Summary.P99 = time.Duration(i+1) * 300 * time.Millisecond
			if v == "none" && rate == 1000 {
				st.Err = "interrupted"
			}
			r.Steps = append(r.Steps, st)
		}
	}
	r.Target = r.target()
	return r
}

func TestSweepTarget(t *testing.T) {
	tg := sampleSweep().Target
	if tg == nil {
		t.Fatal("no target with lua and redlock at the top rate")
	}
	if tg.Rate != 1000 || tg.Ratio != 330.0/400 || tg.P99Limit != 500*time.Millisecond || tg.Met {
		t.Errorf("target %+v: want 1000/s, ratio 0.825, limit 500ms, not met (p99 900ms)", *tg)
	}
}

func TestSweepText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleSweep().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{"1000: sent/s", "redlock", "330", "20 %", "900ms", "ERROR", "0.82×", "NOT MET", "load average 1.00, 1.00, 1.00 before"} {
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
	for _, want := range []string{"<svg", "1000/s offered", "not met", "error"} {
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
	rep, err := Run(ctx, Config{
		Variants: []string{"none", "redlock"}, Rates: []int{50, 100}, Duration: time.Second, WarmUp: -1,
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
