package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/loadtest/output"
	"flashsale/loadtest/traffic"
)

// Capacity is a variant's sizing figure against a target (traffic.SLO):
// the highest offered rate whose step met it, with that step's sales a
// second and the p99 of those sales (not of the 503s beside them), on this
// machine.
type Capacity struct {
	Variant string `json:"variant"`
	// SLO is the target the steps were held to; Met whether one met it.
	SLO traffic.SLO `json:"slo"`
	Met bool        `json:"met"`
	// Offered is the highest offered rate whose step met the SLO, Sales the
	// distinct sales a second that step confirmed. Where no step met it,
	// they are the lowest rate's, for the line to say how far it was.
	Offered int     `json:"offered_per_second"`
	Sales   float64 `json:"sales_per_second"`
	// P99 is the p99 latency of that step's sales alone.
	P99 time.Duration `json:"sale_p99_ns"`
	// Shed is the share of that step's requests answered 503 or 429, in
	// percent.
	Shed float64 `json:"percent_shed"`
	// Line says it in one sentence.
	Line string `json:"line"`
}

// capacities are every variant's figures against slo, from the steps that
// ran and kept every update; a variant with no such step that sold has
// none.
func (r *Report) capacities(slo traffic.SLO) []Capacity {
	var out []Capacity
	for _, v := range r.Variants {
		var best, lowest *Step
		for i := range r.Steps {
			st := &r.Steps[i]
			if st.Variant != v || st.Err != "" || st.LostUpdates > 0 || len(st.CrossCheck) > 0 || st.Sales == 0 {
				continue
			}
			if lowest == nil || st.Rate < lowest.Rate {
				lowest = st
			}
			if slo.Met(st.Summary) && (best == nil || st.Rate > best.Rate) {
				best = st
			}
		}
		if lowest == nil {
			continue
		}
		c := Capacity{Variant: v, SLO: slo, Met: best != nil}
		if best == nil {
			best = lowest
		}
		sale := best.Summary.Latency[traffic.OutcomeSale]
		c.Offered, c.Sales, c.P99, c.Shed = best.Rate, best.Sales, sale.P99, traffic.ShedPercent(best.Summary)
		machine := fmt.Sprintf("on this machine (%d cores, load average %s)", runtime.NumCPU(), r.LoadAfter)
		if c.Met {
			c.Line = fmt.Sprintf("%s meets the SLO (%v) up to %d/s offered: it sells %.0f/s there, sale p99 %s, %.1f %% shed, %s",
				v, slo, c.Offered, c.Sales, output.Millis(c.P99), c.Shed, machine)
		} else {
			c.Line = fmt.Sprintf("%s meets the SLO (%v) at no rate offered: at the lowest, %d/s, it sells %.0f/s, sale p99 %s, %.1f %% shed, %s",
				v, slo, c.Offered, c.Sales, output.Millis(c.P99), c.Shed, machine)
		}
		out = append(out, c)
	}
	return out
}

// latencyNote is the sweep's sentence on what its latencies leave out.
func (c *Config) latencyNote() string {
	top := 0
	for _, r := range c.Rates {
		top = max(top, r)
	}
	return traffic.OmissionNote(c.workers(top)) +
		"; the sweep's cap grows with the rate (rate × (lock wait + 0.5 s) + 64) so that the sent rate keeps to the offered one while every request waits its whole lock wait"
}

// stepResults opens the file that keeps a step's vegeta results, when the
// sweep has an output directory: add records one result, done closes the
// file and says the first error.
func (c *Config) stepResults(what string, rate int) (path string, add func(*vegeta.Result), done func() error) {
	if c.OutDir == "" {
		return "", func(*vegeta.Result) {}, func() error { return nil }
	}
	path = filepath.Join(c.OutDir, "results", "sweep", fmt.Sprintf("%s@%d.bin", output.FileName(what), rate))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", func(*vegeta.Result) {}, func() error { return err }
	}
	f, err := os.Create(path)
	if err != nil {
		return "", func(*vegeta.Result) {}, func() error { return err }
	}
	enc := vegeta.NewEncoder(f)
	var encErr error
	return path, func(r *vegeta.Result) {
			if encErr == nil {
				encErr = enc.Encode(r)
			}
		}, func() error {
			if err := f.Close(); encErr == nil {
				encErr = err
			}
			return encErr
		}
}
