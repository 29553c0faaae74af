package loadtest

import (
	"fmt"
	"io"
	"text/tabwriter"

	"flashsale/loadtest/output"
	"flashsale/loadtest/traffic"
)

// writeLatency writes every cell's latency by outcome (a sale, a refusal,
// a shed answer), with what the figures leave out. The p50 and p99 of the
// cell table mix them; these do not.
func (r *Report) writeLatency(w io.Writer) {
	fmt.Fprintf(w, "\nlatency by outcome, ms (sale: a 2xx that made its order or booking; replay: a 2xx answered from its key's record; refused: 4xx but 429; shed: 503 and 429; error: other or none; what is not in them: the note on coordinated omission below)\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tscenario\toutcome\tcount\tp50\tp90\tp99\tp99.9\tmax\t")
	for _, c := range r.Cells {
		for _, o := range traffic.Outcomes {
			p, ok := c.Summary.Latency[o]
			if !ok || p.Count == 0 {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", c.Variant, c.Scenario, o, p.Count,
				output.Millis(p.P50), output.Millis(p.P90), output.Millis(p.P99), output.Millis(p.P999), output.Millis(p.Max))
		}
	}
	tw.Flush()
}
