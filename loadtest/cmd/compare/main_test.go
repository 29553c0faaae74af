package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"flashsale/internal/machine"
	"flashsale/loadtest"
	"flashsale/loadtest/sweep"
	"flashsale/loadtest/traffic"
)

func cell(v, sc string, verdict loadtest.Verdict, sales float64, p99 time.Duration) loadtest.Cell {
	return loadtest.Cell{Variant: v, Scenario: sc, Verdict: verdict, Summary: traffic.Summary{SalesPerSecond: sales,
		Latency: map[string]traffic.Percentiles{traffic.OutcomeSale: {Count: 10, P99: p99}}}}
}

// write writes v as the report's own JSON into dir.
func write(t *testing.T, dir, name string, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func compareJSON(t *testing.T, args ...string) Comparison {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(append([]string{"-json"}, args...), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var c Comparison
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// Two matrix reports, written by the report's own JSON, compared cell by
// cell: the changes in sales and sale p99, a changed verdict, a cell run
// only once; the one setting they were run with differently, and each
// run's load average. A matrix report against a sweep is refused.
func TestCompare(t *testing.T) {
	dir := t.TempDir()
	settings := loadtest.Settings{Rate: 200, Duration: 4 * time.Second, LockTTL: 500 * time.Millisecond, Instances: 3, Fast: true}
	a := write(t, dir, "a.json", loadtest.Report{Settings: settings, Load: machine.Load{Cores: 2, LoadBefore: "0.50, 0.40, 0.30", LoadAfter: "0.90, 0.50, 0.30"}, Cells: []loadtest.Cell{
		cell("lua", "clean", loadtest.VerdictOK, 100, 20*time.Millisecond),
		cell("lua", "pause-in-critical-section", loadtest.VerdictOK, 50, 10*time.Millisecond),
	}})
	settings.LockTTL = 2 * time.Second
	b := write(t, dir, "b.json", loadtest.Report{Settings: settings, Load: machine.Load{Cores: 2, LoadBefore: "12.00, 9.00, 5.00", LoadAfter: "14.00, 10.00, 6.00"}, Cells: []loadtest.Cell{
		cell("lua", "clean", loadtest.VerdictOK, 150, 10*time.Millisecond),
		cell("lua", "pause-in-critical-section", loadtest.VerdictNoDemo, 50, 10*time.Millisecond),
		cell("redlock", "clean", loadtest.VerdictOK, 80, 30*time.Millisecond),
	}})
	c := compareJSON(t, a, b)
	if want := []SettingDiff{{Name: "lock_ttl", A: "500ms", B: "2s"}}; !slices.Equal(c.SettingsDiffer, want) {
		t.Errorf("settings that differ: %+v, want %+v", c.SettingsDiffer, want)
	}
	if c.A.Busy || !c.B.Busy || len(c.A.Load) != 1 || len(c.B.Load) != 1 {
		t.Errorf("A busy %v (load %v), B busy %v (load %v); want B alone busier than its 2 cores", c.A.Busy, c.A.Load, c.B.Busy, c.B.Load)
	}
	rows := c.Rows
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	clean, pause, only := rows[0], rows[1], rows[2]
	if clean.SalesChange == nil || *clean.SalesChange != 50 || clean.P99Change == nil || *clean.P99Change != -50 || clean.VerdictChanged {
		t.Errorf("lua × clean: %+v", clean)
	}
	if clean.SalesNoise != nil || clean.P99Noise != nil {
		t.Errorf("lua × clean: marked as noise or not with one run a side: %+v", clean)
	}
	if !pause.VerdictChanged {
		t.Errorf("lua × pause: the verdict went from ok to NO-DEMO unseen: %+v", pause)
	}
	if only.A != nil || only.B == nil || only.SalesChange != nil {
		t.Errorf("redlock × clean, in B only: %+v", only)
	}

	s := write(t, dir, "sweep.json", sweep.Report{Steps: []sweep.Step{{Variant: "lua", Rate: 200, Sales: 10}}})
	var out, errOut bytes.Buffer
	if code := run([]string{a, s}, &out, &errOut); code != 2 {
		t.Errorf("a matrix report against a sweep: exit %d, want 2", code)
	}
}

// A side given as reruns is their median, with the spread between them; a
// change no larger than the wider side's spread is inside the noise, a
// larger one is not.
func TestCompareMarksNoise(t *testing.T) {
	dir := t.TempDir()
	rep := func(name string, sales float64, p99 time.Duration) string {
		return write(t, dir, name, loadtest.Report{Cells: []loadtest.Cell{cell("none", "clean", loadtest.VerdictOK, sales, p99)}})
	}
	a := rep("a1.json", 190, 35*time.Millisecond) + "," + rep("a2.json", 210, 8*time.Millisecond) + "," + rep("a3.json", 200, 10*time.Millisecond)
	cases := []struct {
		name             string
		sales            float64
		p99              time.Duration
		salesIn, p99In   bool
		wantSalesPercent float64
	}{
		{"same code at another moment", 205, 30 * time.Millisecond, true, true, 2.5},
		{"a real change", 300, 200 * time.Millisecond, false, false, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := compareJSON(t, a, rep(strings.ReplaceAll(tc.name, " ", "-")+".json", tc.sales, tc.p99))
			if len(c.Rows) != 1 || c.Rows[0].A == nil || c.Rows[0].B == nil {
				t.Fatalf("rows %+v, want none × clean on both sides", c.Rows)
			}
			r := c.Rows[0]
			if r.A.Reruns != 3 || r.A.Sales != 200 || r.A.SalesSpread != 20 || r.A.SaleP99 != 10*time.Millisecond || r.A.P99Spread != 27*time.Millisecond {
				t.Errorf("A: %+v, want the median of 3 reruns and their spread", *r.A)
			}
			if r.SalesNoise == nil || *r.SalesNoise != tc.salesIn || r.P99Noise == nil || *r.P99Noise != tc.p99In {
				t.Errorf("noise marks sales %v, p99 %v; want %v, %v", r.SalesNoise, r.P99Noise, tc.salesIn, tc.p99In)
			}
			if r.SalesChange == nil || *r.SalesChange != tc.wantSalesPercent {
				t.Errorf("sales change %v, want %v %%", r.SalesChange, tc.wantSalesPercent)
			}
		})
	}
}
