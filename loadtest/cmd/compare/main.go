// Command compare sets two load runs side by side, cell by cell: two
// report.json files of the matrix, or two sweep.json files of the sweep.
//
//	go run ./loadtest/cmd/compare out/before/report.json out/after/report.json
//	go run ./loadtest/cmd/compare -json before/sweep.json after/sweep.json
//
// For each cell (variant × scenario) or step (variant × offered rate) it
// gives both runs' verdicts, sales a second and the p99 of the sales alone,
// and the change. A cell in one run only is listed as such.
//
// Exit status: 0 compared; 1 a file could not be read; 2 bad arguments.
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"flashsale/loadtest/output"
	"flashsale/loadtest/traffic"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Side is one run's figures of one cell.
type Side struct {
	Verdict string        `json:"verdict,omitempty"`
	Seen    string        `json:"seen,omitempty"`
	Sales   float64       `json:"sales_per_second"`
	SaleP99 time.Duration `json:"sale_p99_ns"`
	Shed    int           `json:"shed"`
}

// Row is one cell of both runs. A and B are nil where the cell is missing
// from that run; the changes are in percent of A, nil where A is zero or a
// side is missing.
type Row struct {
	Cell        string   `json:"cell"`
	A           *Side    `json:"a"`
	B           *Side    `json:"b"`
	SalesChange *float64 `json:"sales_change_percent"`
	P99Change   *float64 `json:"sale_p99_change_percent"`
	// VerdictChanged is true where both runs judged the cell and differ.
	VerdictChanged bool `json:"verdict_changed,omitempty"`
}

// run is the whole command, callable from tests.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write the rows as JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: compare [-json] A.json B.json\n\nCompares two report.json (matrix) or two sweep.json files cell by cell.\n\n")
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
	a, kindA, err := load(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
	b, kindB, err := load(fs.Arg(1))
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
	if kindA != kindB {
		fmt.Fprintf(stderr, "compare: %s is a %s, %s a %s: compare like with like\n", fs.Arg(0), kindA, fs.Arg(1), kindB)
		return 2
	}
	rows := compare(a, b)
	if *asJSON {
		err = output.JSON(stdout, rows)
	} else {
		err = writeTable(stdout, rows)
	}
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
	return 0
}

// file is the part of report.json and sweep.json that compare reads.
type file struct {
	Cells []struct {
		Variant  string          `json:"variant"`
		Scenario string          `json:"scenario"`
		Verdict  string          `json:"verdict"`
		Seen     string          `json:"seen"`
		Summary  traffic.Summary `json:"vegeta"`
	} `json:"cells"`
	Steps []struct {
		Variant string          `json:"variant"`
		Rate    int             `json:"rate"`
		Summary traffic.Summary `json:"vegeta"`
		Err     string          `json:"error"`
	} `json:"steps"`
}

// load reads a run's cells by name, and says which kind of run it is.
func load(path string) (map[string]Side, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var f file
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]Side{}
	switch {
	case len(f.Cells) > 0:
		for _, c := range f.Cells {
			out[c.Variant+" × "+c.Scenario] = side(c.Summary, c.Verdict, c.Seen)
		}
		return out, "matrix report", nil
	case len(f.Steps) > 0:
		for _, st := range f.Steps {
			verdict := ""
			if st.Err != "" {
				verdict = "ERROR"
			}
			out[fmt.Sprintf("%s × %d/s", st.Variant, st.Rate)] = side(st.Summary, verdict, "")
		}
		return out, "sweep", nil
	}
	return nil, "", errors.New(path + ": neither a report.json (cells) nor a sweep.json (steps)")
}

func side(s traffic.Summary, verdict, seen string) Side {
	return Side{Verdict: verdict, Seen: seen, Sales: s.SalesPerSecond,
		SaleP99: s.Latency[traffic.OutcomeSale].P99, Shed: s.Latency[traffic.OutcomeShed].Count}
}

// compare pairs the cells of a and b, in name order.
func compare(a, b map[string]Side) []Row {
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

func row(name string, a, b map[string]Side) Row {
	r := Row{Cell: name}
	if s, ok := a[name]; ok {
		r.A = &s
	}
	if s, ok := b[name]; ok {
		r.B = &s
	}
	if r.A != nil && r.B != nil {
		r.SalesChange = change(r.A.Sales, r.B.Sales)
		r.P99Change = change(float64(r.A.SaleP99), float64(r.B.SaleP99))
		r.VerdictChanged = r.A.Verdict != r.B.Verdict || r.A.Seen != r.B.Seen
	}
	return r
}

func change(a, b float64) *float64 {
	if a == 0 {
		return nil
	}
	c := 100 * (b - a) / a
	return &c
}

// writeTable writes the rows for a terminal.
func writeTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cell\tA verdict\tB verdict\tA sales/s\tB sales/s\tΔ\tA sale p99\tB sale p99\tΔ\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Cell, verdict(r.A), verdict(r.B),
			field(r.A, func(s *Side) string { return fmt.Sprintf("%.1f", s.Sales) }), field(r.B, func(s *Side) string { return fmt.Sprintf("%.1f", s.Sales) }), pct(r.SalesChange),
			field(r.A, func(s *Side) string { return output.Millis(s.SaleP99) }), field(r.B, func(s *Side) string { return output.Millis(s.SaleP99) }), pct(r.P99Change))
	}
	return tw.Flush()
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

func pct(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%+.0f %%", *p)
}
