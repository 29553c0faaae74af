// Command compare sets two load runs side by side, cell by cell: two
// report.json files of the matrix, or two sweep.json files of the sweep.
//
//	go run ./loadtest/cmd/compare out/before/report.json out/after/report.json
//	go run ./loadtest/cmd/compare -json before/sweep.json after/sweep.json
//	go run ./loadtest/cmd/compare a1/report.json,a2/report.json b1/report.json,b2/report.json
//
// For each cell (variant × scenario) or step (variant × offered rate) it
// gives both runs' verdicts, sales a second and the p99 of the sales alone,
// and the change. A cell in one run only is listed as such. Above the
// cells: the settings the two runs were run with that differ (a lock TTL,
// a rate, the instances…), which explain a change before any code does,
// and the noise: each run's load average, and, where a side is given as
// several reruns (comma-separated files), the spread between them. A
// change no larger than that spread is marked as inside the noise.
//
// Exit status: 0 compared; 1 a file could not be read; 2 bad arguments.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"flashsale/loadtest/output"
	"flashsale/loadtest/traffic"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Side is one run's figures of one cell: with reruns, the median of them
// and the spread (largest less smallest) between them.
type Side struct {
	Verdict string        `json:"verdict,omitempty"`
	Seen    string        `json:"seen,omitempty"`
	Sales   float64       `json:"sales_per_second"`
	SaleP99 time.Duration `json:"sale_p99_ns"`
	Shed    int           `json:"shed"`
	Reruns  int           `json:"reruns"`
	// SalesSpread and P99Spread are the spread between the reruns; 0 with
	// one.
	SalesSpread float64       `json:"sales_spread"`
	P99Spread   time.Duration `json:"sale_p99_spread_ns"`
}

// Row is one cell of both runs. A and B are nil where the cell is missing
// from that run; the changes are in percent of A, nil where A is zero or a
// side is missing. The noise marks are nil where neither side has reruns
// to tell noise by, else whether the change is no larger than the wider
// side's spread.
type Row struct {
	Cell        string   `json:"cell"`
	A           *Side    `json:"a"`
	B           *Side    `json:"b"`
	SalesChange *float64 `json:"sales_change_percent"`
	P99Change   *float64 `json:"sale_p99_change_percent"`
	SalesNoise  *bool    `json:"sales_change_within_noise,omitempty"`
	P99Noise    *bool    `json:"sale_p99_change_within_noise,omitempty"`
	// VerdictChanged is true where both runs judged the cell and differ.
	VerdictChanged bool `json:"verdict_changed,omitempty"`
}

// Comparison is the whole answer: both runs, the settings that differ, the
// cells.
type Comparison struct {
	A              *Run          `json:"a"`
	B              *Run          `json:"b"`
	SettingsDiffer []SettingDiff `json:"settings_differ"`
	Rows           []Row         `json:"rows"`
}

// run is the whole command, callable from tests.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write the comparison as JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: compare [-json] A.json[,A2.json…] B.json[,B2.json…]\n\nCompares two report.json (matrix) or two sweep.json files cell by cell; "+
			"a side given as several reruns, comma-separated, tells the noise.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	a, err := loadRun(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
	b, err := loadRun(fs.Arg(1))
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
	if a.Kind != b.Kind {
		fmt.Fprintf(stderr, "compare: %s is a %s, %s a %s: compare like with like\n", fs.Arg(0), a.Kind, fs.Arg(1), b.Kind)
		return 2
	}
	c := Comparison{A: a, B: b, SettingsDiffer: settingsDiffer(a.Settings, b.Settings), Rows: compare(a.cells, b.cells)}
	if *asJSON {
		err = output.JSON(stdout, c)
	} else {
		err = writeText(stdout, c)
	}
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
	return 0
}

func side(s traffic.Summary, verdict, seen string) Side {
	return Side{Verdict: verdict, Seen: seen, Sales: s.SalesPerSecond, Reruns: 1,
		SaleP99: s.Latency[traffic.OutcomeSale].P99, Shed: s.Latency[traffic.OutcomeShed].Count}
}

// merged is one cell's reruns as one side: the median figures, the spread,
// the verdict of every rerun (one when they agree).
func merged(reruns []Side) Side {
	if len(reruns) == 1 {
		return reruns[0]
	}
	sales := make([]float64, len(reruns))
	p99 := make([]time.Duration, len(reruns))
	var verdicts, seen []string
	shed := 0
	for i, r := range reruns {
		sales[i], p99[i], shed = r.Sales, r.SaleP99, shed+r.Shed
		if !slices.Contains(verdicts, r.Verdict) {
			verdicts = append(verdicts, r.Verdict)
		}
		if !slices.Contains(seen, r.Seen) {
			seen = append(seen, r.Seen)
		}
	}
	slices.Sort(sales)
	slices.Sort(p99)
	return Side{Verdict: strings.Join(verdicts, "/"), Seen: strings.Join(seen, "/"), Reruns: len(reruns),
		Sales: median(sales), SalesSpread: sales[len(sales)-1] - sales[0],
		SaleP99: median(p99), P99Spread: p99[len(p99)-1] - p99[0], Shed: shed / len(reruns)}
}

// median of sorted figures: the middle one, or the mean of the middle two.
func median[T float64 | time.Duration](sorted []T) T {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// compare pairs the cells of a and b, in name order.
func compare(a, b map[string][]Side) []Row {
	var rows []Row
	for name := range a {
		rows = append(rows, row(name, a, b))
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			rows = append(rows, row(name, a, b))
		}
	}
	slices.SortFunc(rows, func(x, y Row) int { return cmp.Compare(x.Cell, y.Cell) })
	return rows
}

func row(name string, a, b map[string][]Side) Row {
	r := Row{Cell: name}
	if reruns, ok := a[name]; ok {
		s := merged(reruns)
		r.A = &s
	}
	if reruns, ok := b[name]; ok {
		s := merged(reruns)
		r.B = &s
	}
	if r.A != nil && r.B != nil {
		r.SalesChange = change(r.A.Sales, r.B.Sales)
		r.P99Change = change(float64(r.A.SaleP99), float64(r.B.SaleP99))
		r.VerdictChanged = r.A.Verdict != r.B.Verdict || r.A.Seen != r.B.Seen
		if r.A.Reruns > 1 || r.B.Reruns > 1 {
			r.SalesNoise = within(r.B.Sales-r.A.Sales, max(r.A.SalesSpread, r.B.SalesSpread))
			r.P99Noise = within(float64(r.B.SaleP99-r.A.SaleP99), float64(max(r.A.P99Spread, r.B.P99Spread)))
		}
	}
	return r
}

// within reports whether a change is no larger than the spread between
// reruns.
func within(change, spread float64) *bool {
	in := change <= spread && -change <= spread
	return &in
}

func change(a, b float64) *float64 {
	if a == 0 {
		return nil
	}
	c := 100 * (b - a) / a
	return &c
}

// writeText writes the comparison for a terminal: both runs and their
// noise, the settings that differ, then the cells.
func writeText(w io.Writer, c Comparison) error {
	ew := &output.ErrWriter{W: w}
	for _, r := range []struct {
		name string
		run  *Run
	}{{"A", c.A}, {"B", c.B}} {
		busy := ""
		if r.run.Busy {
			busy = fmt.Sprintf(": busier than its %d cores", r.run.Cores)
		}
		fmt.Fprintf(ew, "%s: %s (%d run", r.name, strings.Join(r.run.Files, ", "), len(r.run.Files))
		if len(r.run.Files) > 1 {
			fmt.Fprint(ew, "s")
		}
		fmt.Fprintf(ew, "), load average before → after: %s%s\n", strings.Join(r.run.Load, "; "), busy)
	}
	if len(c.SettingsDiffer) == 0 {
		fmt.Fprintln(ew, "settings: the same")
	} else {
		fmt.Fprintln(ew, "settings that differ (a change below may be theirs, not the code's):")
		for _, d := range c.SettingsDiffer {
			fmt.Fprintf(ew, "  %s: %s → %s\n", d.Name, d.A, d.B)
		}
	}
	if len(c.A.Files) == 1 && len(c.B.Files) == 1 {
		fmt.Fprintln(ew, "noise: one run a side, so no rerun spread: a change is not marked as noise or not; give a side as reruns, comma-separated, to tell")
	} else {
		fmt.Fprintln(ew, "noise: ± is the spread between a side's reruns (largest less smallest; figures are their median); (noise) marks a change no larger than the wider side's spread")
	}
	fmt.Fprintln(ew)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cell\tA verdict\tB verdict\tA sales/s\tB sales/s\tΔ\tA sale p99\tB sale p99\tΔ\t")
	for _, r := range c.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Cell, verdict(r.A), verdict(r.B),
			field(r.A, salesOf), field(r.B, salesOf), pct(r.SalesChange, r.SalesNoise),
			field(r.A, p99Of), field(r.B, p99Of), pct(r.P99Change, r.P99Noise))
	}
	tw.Flush()
	return ew.Err
}

func salesOf(s *Side) string {
	if s.Reruns > 1 {
		return fmt.Sprintf("%.1f ±%.1f", s.Sales, s.SalesSpread)
	}
	return fmt.Sprintf("%.1f", s.Sales)
}

func p99Of(s *Side) string {
	if s.Reruns > 1 {
		spread := "0ms" // Millis writes a dash for nothing measured; a spread of 0 was measured
		if s.P99Spread > 0 {
			spread = output.Millis(s.P99Spread)
		}
		return output.Millis(s.SaleP99) + " ±" + spread
	}
	return output.Millis(s.SaleP99)
}

func verdict(s *Side) string {
	switch {
	case s == nil:
		return "(not run)"
	case s.Seen != "":
		return s.Seen + " " + s.Verdict
	default:
		return s.Verdict
	}
}

func field(s *Side, f func(*Side) string) string {
	if s == nil {
		return "—"
	}
	return f(s)
}

func pct(p *float64, noise *bool) string {
	switch {
	case p == nil:
		return "—"
	case noise != nil && *noise:
		return fmt.Sprintf("%+.0f %% (noise)", *p)
	}
	return fmt.Sprintf("%+.0f %%", *p)
}
