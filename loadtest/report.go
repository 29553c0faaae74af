package loadtest

import (
	"fmt"
	"io"
	"strings"
	"time"

	"flashsale/internal/machine"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/linear"
	"flashsale/loadtest/output"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
	"flashsale/lock"
	"flashsale/lock/ladder"
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
	// Fast is the locks' speed layer (off: -fast=false, the taught code);
	// Batch and Watchdog whether every cell ran with them on.
	Fast     bool `json:"fast"`
	Batch    bool `json:"batch"`
	Watchdog bool `json:"watchdog"`
}

func settingsOf(c Config) Settings {
	return Settings{
		Rate: c.Rate, Duration: c.Duration, MaxRequests: c.MaxRequests, MaxWorkers: c.MaxWorkers,
		Seed: c.Seed, LockTTL: c.LockTTL, LockWait: c.LockWait, Targets: c.Targets, Catalogue: *c.Catalogue, Mix: *c.Mix,
		Instances: len(c.Targets), Nodes: len(c.RedisURLs), Fast: !c.Taught, Batch: c.Batch, Watchdog: c.Watchdog,
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
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Command  string    `json:"command,omitempty"`
	Settings Settings  `json:"settings"`
	// machine.Load says how busy the machine was: the figures are only as
	// quiet as it was.
	machine.Load
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
	of, base := r.Cell(lock.Redlock, Clean), r.Cell(ladder.None, Clean)
	if of != nil && base != nil && base.Summary.SalesPerSecond > 0 {
		r.RedlockVsNone = &Throughput{
			Scenario: Clean, Of: lock.Redlock, Against: ladder.None,
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
