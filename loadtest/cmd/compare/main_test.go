package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"flashsale/loadtest"
	"flashsale/loadtest/sweep"
	"flashsale/loadtest/traffic"
)

// Two matrix reports, written by the report's own JSON, compared cell by
// cell: the changes in sales and sale p99, a changed verdict, a cell run
// only once. A matrix report against a sweep is refused.
func TestCompare(t *testing.T) {
	cell := func(v, sc string, verdict loadtest.Verdict, sales float64, p99 time.Duration) loadtest.Cell {
		return loadtest.Cell{Variant: v, Scenario: sc, Verdict: verdict, Summary: traffic.Summary{SalesPerSecond: sales,
			Latency: map[string]traffic.Percentiles{traffic.OutcomeSale: {Count: 10, P99: p99}}}}
	}
	dir := t.TempDir()
	write := func(name string, v any) string {
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
	a := write("a.json", loadtest.Report{Cells: []loadtest.Cell{
		cell("lua", "clean", loadtest.VerdictOK, 100, 20*time.Millisecond),
		cell("lua", "pause-in-critical-section", loadtest.VerdictOK, 50, 10*time.Millisecond),
	}})
	b := write("b.json", loadtest.Report{Cells: []loadtest.Cell{
		cell("lua", "clean", loadtest.VerdictOK, 150, 10*time.Millisecond),
		cell("lua", "pause-in-critical-section", loadtest.VerdictNoDemo, 50, 10*time.Millisecond),
		cell("redlock", "clean", loadtest.VerdictOK, 80, 30*time.Millisecond),
	}})
	var out, errOut bytes.Buffer
	if code := run([]string{"-json", a, b}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rows []Row
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %s", len(rows), out.String())
	}
	clean, pause, only := rows[0], rows[1], rows[2]
	if clean.SalesChange == nil || *clean.SalesChange != 50 || clean.P99Change == nil || *clean.P99Change != -50 || clean.VerdictChanged {
		t.Errorf("lua × clean: %+v", clean)
	}
	if !pause.VerdictChanged {
		t.Errorf("lua × pause: the verdict went from ok to NO-DEMO unseen: %+v", pause)
	}
	if only.A != nil || only.B == nil || only.SalesChange != nil {
		t.Errorf("redlock × clean, in B only: %+v", only)
	}

	s := write("sweep.json", sweep.Report{Steps: []sweep.Step{{Variant: "lua", Rate: 200, Sales: 10}}})
	if code := run([]string{a, s}, &out, &errOut); code != 2 {
		t.Errorf("a matrix report against a sweep: exit %d, want 2", code)
	}
}
