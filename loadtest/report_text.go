package loadtest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"flashsale/loadtest/output"
	"flashsale/loadtest/traffic"
)

// cellLegend says what each column of the cell table counts, under it:
// the audit's figures cover every SKU and seat, the answers every request.
const cellLegend = `columns:
  hot sold/initial  units of the scarce SKU sold (its orders in the database) of its stock, from the audit
  oversold, lost upd, dbl-booked, stuck  the audit, over every SKU and seat; a lost update is a unit sold whose stock
      decrement another holder overwrote (|initial - sold - stock|): the stock then says more is left than was sold, so
      a broken lock breaks while selling less than its stock (hot sold below initial) by the same race that oversells
      once the stock runs low
  201 … other       every answer of the cell: every SKU, the seat grabs and the resends, not the hot SKU alone
  replays           the 201s that answered a resend from its key's record: no sale, no lock (timed apart, below)
  offered/s, sent/s the rate asked for and the rate vegeta sent; below the offered rate every worker was busy, and the
      latencies leave out the time requests waited to be sent (coordinated omission)
  sales/s           distinct orders and bookings confirmed, per second of the attack's send window
  stock out         when the first sold_out answer came back, from the first request sent (— the stock lasted)
  in-stock/s        the sales answered before then, per second of it: the sale rate while the stock lasted
  p50, p99          every answer, whatever its outcome (by outcome: the latency table below)
`

// stockOut is when the stock ran out, as the cell table shows it.
func stockOut(s traffic.Summary) string {
	if s.StockRanOut == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fs", s.StockRanOut.Seconds())
}

// inStock is the sale rate while the stock lasted, as the table shows it.
func inStock(s traffic.Summary) string {
	if s.StockRanOut == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", s.SalesPerSecondInStock)
}

// WriteText writes the comparison: the matrix of expected against seen,
// then one line per cell with the figures, then why cells broke.
func (r *Report) WriteText(w io.Writer) error {
	ew := &output.ErrWriter{W: w}
	fmt.Fprintf(ew, "flashsale load run: %d req/s for %v per cell (cap %d requests, %d workers), seed %d, lock TTL %v, %d app instances, %d Redis nodes\n",
		r.Settings.Rate, r.Settings.Duration, r.Settings.MaxRequests, r.Settings.MaxWorkers, r.Settings.Seed, r.Settings.LockTTL, r.Settings.Instances, r.Settings.Nodes)
	fmt.Fprintf(ew, "machine: %d cores, load average %s before, %s after\n", r.Cores, r.LoadBefore, r.LoadAfter)
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
	fmt.Fprintln(tw, "variant\tscenario\texpected\tseen\tverdict\tlinearizable\thot sold/initial\toversold\tlost upd\tdbl-booked\tstuck\t"+
		"201\treplays\t409\t503\tother\toffered/s\tsent/s\tsales/s\tstock out\tin-stock/s\tp50\tp99\t")
	for _, c := range r.Cells {
		if c.Verdict == VerdictSkipped {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\tskipped\t%s\n", c.Variant, c.Scenario, c.Expected, strings.Repeat("\t", 18))
			continue
		}
		s := c.Summary
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t\n",
			c.Variant, c.Scenario, c.Expected, c.Seen, c.Verdict, c.LinearMark(),
			c.SoldOfInitial(), c.Audit.OversoldUnits, c.Audit.LostUpdates, c.Audit.DoubleBookedSeats, c.StuckLocks,
			s.Counts.Created, s.Counts.Replays, s.Counts.Conflict, s.Counts.Unavailable, s.Counts.Other,
			s.Offered, s.Sent, s.SalesPerSecond, stockOut(s), inStock(s), output.Millis(s.P50), output.Millis(s.P99))
	}
	tw.Flush()
	fmt.Fprint(ew, "\n"+cellLegend)
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
	return ew.Err
}
