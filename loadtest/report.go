package loadtest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"flashsale/loadtest/cluster"
	"flashsale/loadtest/linear"
	"flashsale/loadtest/output"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
)

// Verdict is a cell's seen outcome judged against the expected one.
type Verdict string

// Verdicts.
const (
	// VerdictOK: the cell did what the curriculum (curriculum/table.go) expects.
	VerdictOK Verdict = "ok"
	// VerdictBug: a cell expected to hold broke. Always a failure.
	VerdictBug Verdict = "BUG"
	// VerdictNoDemo: a cell expected to break held, so the demo no longer
	// teaches. A failure under -strict.
	VerdictNoDemo Verdict = "NO-DEMO"
	// VerdictError: the cell could not be run or judged. Always a failure.
	VerdictError Verdict = "ERROR"
	// VerdictSkipped: the cell cannot run against these targets.
	VerdictSkipped Verdict = "skipped"
)

// Cell is one variant under one scenario: what was expected, what the audit
// and vegeta's results say happened, and the verdict.
type Cell struct {
	Variant  string  `json:"variant"`
	Scenario string  `json:"scenario"`
	Expected Outcome `json:"expected"`
	Seen     Outcome `json:"seen,omitempty"`
	Verdict  Verdict `json:"verdict"`
	// Reasons say why the cell broke (or could not be judged), from the
	// audit and the cross-check only.
	Reasons []string `json:"reasons,omitempty"`
	// Initial is the stock the sale started with, all SKUs together.
	Initial int64 `json:"initial_stock"`
	// HotSKU is the scarce product, where overselling shows.
	HotSKU string           `json:"hot_sku,omitempty"`
	Audit  storefront.Audit `json:"audit"`
	// FaultsFired counts the injected faults that fired, by point, summed
	// over the instances: evidence that a cell faced its fault.
	FaultsFired map[string]uint64 `json:"faults_fired,omitempty"`
	// StuckLocks is the larger of the audit's figure and the runner's own
	// scan of the Redis nodes.
	StuckLocks    int                 `json:"stuck_locks"`
	StuckLockKeys []cluster.StuckLock `json:"stuck_lock_keys,omitempty"`
	Summary       traffic.Summary     `json:"vegeta"`
	// CrossCheck lists every disagreement between the audit and vegeta.
	CrossCheck []string `json:"cross_check,omitempty"`
	// Linearizable is porcupine's verdict on the history the shoppers
	// saw (loadtest/linear): null when the check ran out of time or never
	// ran. Linear has its sizes, its time and the partitions that failed;
	// HistoryFile is its picture when it is not linearizable, relative to
	// the output directory.
	Linearizable *bool           `json:"linearizable"`
	Linear       *linear.Verdict `json:"linearizability,omitempty"`
	HistoryFile  string          `json:"history_file,omitempty"`
	// Disagreement says how the audit and porcupine disagree; "" when they
	// agree. DisagreementDeclared is why the curriculum lets them, for a
	// rung whose design does.
	Disagreement         string `json:"disagreement,omitempty"`
	DisagreementDeclared string `json:"disagreement_declared,omitempty"`
	// Unanswered names the first requests that got no answer.
	Unanswered []Unanswered `json:"unanswered,omitempty"`
	// Notes are what happened along the way (node faults, scans).
	Notes       []string `json:"notes,omitempty"`
	ResultsFile string   `json:"results_file,omitempty"`
}

// judge decides the seen outcome from the audit, the runner's scan and the
// cross-check — never from the variant's name — and the verdict from it.
func (c *Cell) judge() {
	var broke []string
	if n := c.Audit.OversoldUnits; n > 0 {
		broke = append(broke, fmt.Sprintf("oversold %d units", n))
	}
	if n := c.Audit.LostUpdates; n > 0 {
		broke = append(broke, fmt.Sprintf("%d lost updates", n))
	}
	if n := c.Audit.DoubleBookedSeats; n > 0 {
		broke = append(broke, fmt.Sprintf("%d seats double-booked", n))
	}
	if c.StuckLocks > 0 {
		broke = append(broke, fmt.Sprintf("%d stuck locks (no TTL)", c.StuckLocks))
	}
	s := c.Summary.Counts
	switch {
	case s.Requests == 0:
		c.Verdict, c.Reasons = VerdictError, []string{"no request was sent"}
		return
	case s.Transport > 0:
		// A hang is a bug under every rung, whatever else broke; and an
		// order nobody saw answered leaves the cross-check untrusted.
		c.Verdict = VerdictError
		c.Reasons = append(append([]string{UnansweredReason(s.Transport, c.Unanswered)}, broke...), c.CrossCheck...)
		return
	}
	for _, p := range c.CrossCheck {
		broke = append(broke, "cross-check: "+p)
	}
	c.Reasons = broke
	c.Seen = Holds
	if len(broke) > 0 {
		c.Seen = Breaks
	}
	if c.Seen == Holds && c.Summary.Sales == 0 && c.Expected == NoClaim {
		// Shown, not judged: a cell that sells nothing is no claim either way.
		c.Seen, c.Verdict = "", VerdictOK
		c.Notes = append(c.Notes, "nothing was sold")
		return
	}
	if c.Seen == Holds && c.Summary.Sales == 0 {
		c.Seen, c.Verdict = "", VerdictError
		c.Reasons = []string{"nothing was sold: a sale that never ran cannot be said to hold"}
		return
	}
	switch {
	case c.Expected == "" || c.Expected == NoClaim || c.Expected == Either || c.Seen == c.Expected:
		c.Verdict = VerdictOK
	case c.Expected == Holds:
		c.Verdict = VerdictBug
	default:
		c.Verdict = VerdictNoDemo
	}
}

// Settings are the parameters of a run, as the report records them.
type Settings struct {
	Rate        int                  `json:"rate_per_second"`
	Duration    time.Duration        `json:"duration_ns"`
	MaxRequests uint64               `json:"max_requests"`
	MaxWorkers  uint64               `json:"max_workers"`
	Seed        uint64               `json:"seed"`
	LockTTL     time.Duration        `json:"lock_ttl_ns"`
	LockWait    time.Duration        `json:"lock_wait_ns,omitempty"`
	Instances   int                  `json:"instances"`
	Nodes       int                  `json:"redis_nodes"`
	Targets     []string             `json:"targets,omitempty"`
	Catalogue   storefront.Catalogue `json:"catalogue"`
	Mix         traffic.Mix          `json:"mix"`
}

func settingsOf(c Config) Settings {
	return Settings{
		Rate: c.Rate, Duration: c.Duration, MaxRequests: c.MaxRequests, MaxWorkers: c.MaxWorkers,
		Seed: c.Seed, LockTTL: c.LockTTL, LockWait: c.LockWait, Targets: c.Targets, Catalogue: *c.Catalogue, Mix: *c.Mix,
		Instances: len(c.Targets), Nodes: len(c.RedisURLs),
	}
}

// Throughput compares the completed sales per second of two variants in
// the same run, under the same traffic.
type Throughput struct {
	Scenario string  `json:"scenario"`
	Of       string  `json:"of"`
	Against  string  `json:"against"`
	OfRate   float64 `json:"of_sales_per_second"`
	BaseRate float64 `json:"against_sales_per_second"`
	Ratio    float64 `json:"ratio"`
}

// Report is a whole run.
type Report struct {
	Started   time.Time  `json:"started"`
	Finished  time.Time  `json:"finished"`
	Command   string     `json:"command,omitempty"`
	Settings  Settings   `json:"settings"`
	Variants  []string   `json:"variants"`
	Scenarios []Scenario `json:"scenarios"`
	Cells     []Cell     `json:"cells"`
	// RedlockVsNone is redlock's throughput of completed sales against
	// none's, in the clean scenario of this run.
	RedlockVsNone *Throughput `json:"redlock_vs_none,omitempty"`
	Bugs          int         `json:"bugs"`
	NoDemos       int         `json:"no_demos"`
	Errors        int         `json:"errors"`
	Skipped       int         `json:"skipped"`
	// Disagreements counts the cells where the audit and porcupine disagree
	// undeclared; DeclaredDisagreements those the curriculum declares.
	Disagreements         int      `json:"disagreements"`
	DeclaredDisagreements int      `json:"declared_disagreements"`
	Notes                 []string `json:"notes,omitempty"`

	plots map[string][]byte // vegeta's HTML latency plot per scenario
}

func (r *Report) summarise() {
	r.Bugs, r.NoDemos, r.Errors, r.Skipped, r.Disagreements, r.DeclaredDisagreements = 0, 0, 0, 0, 0, 0
	for _, c := range r.Cells {
		switch {
		case c.Disagreement != "" && c.DisagreementDeclared != "":
			r.DeclaredDisagreements++
		case c.Disagreement != "":
			r.Disagreements++
		}
		switch c.Verdict {
		case VerdictBug:
			r.Bugs++
		case VerdictNoDemo:
			r.NoDemos++
		case VerdictError:
			r.Errors++
		case VerdictSkipped:
			r.Skipped++
		}
	}
	of, base := r.Cell("redlock", Clean), r.Cell("none", Clean)
	if of != nil && base != nil && base.Summary.SalesPerSecond > 0 {
		r.RedlockVsNone = &Throughput{
			Scenario: Clean, Of: "redlock", Against: "none",
			OfRate: of.Summary.SalesPerSecond, BaseRate: base.Summary.SalesPerSecond,
			Ratio: of.Summary.SalesPerSecond / base.Summary.SalesPerSecond,
		}
	}
}

// Cell returns the cell of variant under scenario, or nil.
func (r *Report) Cell(variant, scenario string) *Cell {
	for i := range r.Cells {
		if r.Cells[i].Variant == variant && r.Cells[i].Scenario == scenario {
			return &r.Cells[i]
		}
	}
	return nil
}

// Failed reports whether the run must exit non-zero: a cell expected to hold
// broke, or a cell could not be judged (an unanswered request among the
// reasons); with strict, also a cell expected to break held. A
// disagreement of the audit and porcupine fails as DisagreementFails says,
// as it does in a chaos run.
func (r *Report) Failed(strict bool) bool {
	for _, c := range r.Cells {
		if c.Disagreement != "" && DisagreementFails(c.Variant, c.Expected, strict) {
			return true
		}
	}
	return r.Bugs > 0 || r.Errors > 0 || (strict && r.NoDemos > 0)
}

// SoldOfInitial is "sold/initial" of the hot SKU when the audit has it per
// SKU, else of all SKUs together.
func (c *Cell) SoldOfInitial() string {
	for _, p := range c.Audit.Products {
		if p.SKU == c.HotSKU {
			return fmt.Sprintf("%d/%d", p.SoldUnits, p.InitialStock)
		}
	}
	return fmt.Sprintf("%d/%d", c.Audit.SoldUnits, c.Initial)
}

// mark is a matrix entry: what was seen, and whether it was expected.
func (c *Cell) mark() string {
	switch c.Verdict {
	case VerdictSkipped:
		return "skipped"
	case VerdictError:
		return "ERROR"
	case VerdictOK:
		if c.Expected == NoClaim {
			return string(c.Seen) + " (no claim)"
		}
		if c.Expected == Either {
			return string(c.Seen) + " (either)"
		}
		return string(c.Seen) + " ✓"
	default:
		return strings.ToUpper(string(c.Seen)) + " ✗"
	}
}

// WriteText writes the comparison: the matrix of expected against seen,
// then one line per cell with the figures, then why cells broke.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "flashsale load run: %d req/s for %v per cell (cap %d requests, %d workers), seed %d, lock TTL %v, %d app instances, %d Redis nodes\n",
		r.Settings.Rate, r.Settings.Duration, r.Settings.MaxRequests, r.Settings.MaxWorkers, r.Settings.Seed, r.Settings.LockTTL, r.Settings.Instances, r.Settings.Nodes)
	for _, sc := range r.Scenarios {
		var own []string
		if sc.LockTTL != 0 {
			own = append(own, fmt.Sprintf("lease TTL %v", sc.LockTTL))
		}
		if sc.MinDuration > r.Settings.Duration {
			own = append(own, fmt.Sprintf("attacks of %v", sc.MinDuration))
		}
		if sc.Unaware {
			own = append(own, "restart awareness off")
		}
		if len(own) > 0 {
			fmt.Fprintf(ew, "  %s: %s\n", sc.Name, strings.Join(own, ", "))
		}
	}
	fmt.Fprintf(ew, "\nexpected vs seen (✓ as the curriculum in curriculum/table.go expects, ✗ not; upper case marks the surprise)\n\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "variant")
	for _, sc := range r.Scenarios {
		fmt.Fprintf(tw, "\t%s", sc.Name)
	}
	fmt.Fprintln(tw)
	for _, v := range r.Variants {
		fmt.Fprint(tw, v)
		for _, sc := range r.Scenarios {
			cell := "—"
			if c := r.Cell(v, sc.Name); c != nil {
				cell = c.mark()
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	fmt.Fprintf(ew, "\n")
	tw = tabwriter.NewWriter(ew, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tscenario\texpected\tseen\tverdict\tlinearizable\thot sold/initial\toversold\tlost upd\tdbl-booked\tstuck\t201\t409\t503\tother\tsales/s\tp50\tp99\t")
	for _, c := range r.Cells {
		if c.Verdict == VerdictSkipped {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\tskipped\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", c.Variant, c.Scenario, c.Expected)
			continue
		}
		s := c.Summary
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\t\n",
			c.Variant, c.Scenario, c.Expected, c.Seen, c.Verdict, c.LinearMark(),
			c.SoldOfInitial(), c.Audit.OversoldUnits, c.Audit.LostUpdates, c.Audit.DoubleBookedSeats, c.StuckLocks,
			s.Counts.Created, s.Counts.Conflict, s.Counts.Unavailable, s.Counts.Other,
			s.SalesPerSecond, output.Millis(s.P50), output.Millis(s.P99))
	}
	tw.Flush()

	fmt.Fprintf(ew, "\nhot sold/initial: units of the scarce SKU sold, from the audit; sales/s: distinct orders and bookings confirmed, "+
		"per second of the attack's send window\n")
	if t := r.RedlockVsNone; t != nil {
		fmt.Fprintf(ew, "throughput of completed sales, %s scenario: redlock %.1f/s vs none %.1f/s = %.2f×\n", t.Scenario, t.OfRate, t.BaseRate, t.Ratio)
	}
	r.writeLatency(ew)
	fmt.Fprintf(ew, "\nwhy (from the audit, the runner's Redis scan and the cross-check with vegeta):\n")
	for _, c := range r.Cells {
		if len(c.Reasons) == 0 && len(c.Notes) == 0 && len(c.FaultsFired) == 0 && c.Disagreement == "" && c.HistoryFile == "" {
			continue
		}
		fmt.Fprintf(ew, "  %s × %s [%s]", c.Variant, c.Scenario, c.Verdict)
		if len(c.Reasons) > 0 {
			fmt.Fprintf(ew, ": %s", strings.Join(c.Reasons, "; "))
		}
		if codes := output.Counts(c.Summary.Counts.ByError); codes != "" {
			fmt.Fprintf(ew, " (answers: %s)", codes)
		}
		if fired := output.Counts(c.FaultsFired); fired != "" {
			fmt.Fprintf(ew, " (faults fired: %s)", fired)
		}
		fmt.Fprintln(ew)
		if c.Disagreement != "" && c.DisagreementDeclared != "" {
			fmt.Fprintf(ew, "      disagreement, declared (%s): %s\n", c.DisagreementDeclared, c.Disagreement)
		} else if c.Disagreement != "" {
			fmt.Fprintf(ew, "      DISAGREEMENT: %s\n", c.Disagreement)
		}
		for _, u := range c.Unanswered {
			fmt.Fprintf(ew, "      UNANSWERED: %s, waited %v %s\n", u.Request, u.Waited.Round(time.Millisecond), u.Error)
		}
		if c.HistoryFile != "" {
			fmt.Fprintf(ew, "      not linearizable (%s): %s\n", strings.Join(c.Linear.Illegal, ", "), c.HistoryFile)
		}
		for _, n := range c.Notes {
			fmt.Fprintf(ew, "      %s\n", n)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(ew, "note: %s\n", n)
	}
	fmt.Fprintf(ew, "\n%d cells: %d bugs (a cell that must hold broke), %d no-demo (a cell that must break held), %d errors, %d skipped, "+
		"%d disagreements of the audit and porcupine the curriculum does not declare (%d declared)\n",
		len(r.Cells), r.Bugs, r.NoDemos, r.Errors, r.Skipped, r.Disagreements, r.DeclaredDisagreements)
	fmt.Fprintln(ew, linearFigures(r.Cells))
	return ew.err
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error { return output.JSON(w, r) }

// WriteFiles writes the reports and charts into dir, beside vegeta's results/.
func (r *Report) WriteFiles(dir string) error {
	return output.WriteFiles(dir,
		output.File{Name: "report.txt", Write: r.WriteText},
		output.File{Name: "report.json", Write: r.WriteJSON},
		output.File{Name: "report.html", Write: r.WriteHTML},
		output.File{Name: "oversold.svg", Write: output.SVG(func() string { return r.Chart(MetricOversold) })},
		output.File{Name: "lost-updates.svg", Write: output.SVG(func() string { return r.Chart(MetricLost) })},
	)
}
