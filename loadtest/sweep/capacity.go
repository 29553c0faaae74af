package sweep

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/loadtest/output"
	"flashsale/loadtest/traffic"
)

// Capacity is a variant's sizing figure: its best step's sales a second and
// the p99 of those sales (not of the 503s beside them), on this machine.
type Capacity struct {
	Variant string `json:"variant"`
	// Sales is the most distinct sales a second any step of the variant
	// confirmed, and Offered the rate offered in that step.
	Sales   float64 `json:"sales_per_second"`
	Offered int     `json:"offered_per_second"`
	// P99 is the p99 latency of that step's sales alone.
	P99 time.Duration `json:"sale_p99_ns"`
	// Shed is the share of that step's requests answered 503 or 429, in
	// percent.
	Shed float64 `json:"percent_shed"`
	// Line says it in one sentence.
	Line string `json:"line"`
}

// capacities are every variant's figures, from the steps that ran and
// kept every update; a variant with no such step has none.
func (r *Report) capacities() []Capacity {
	var out []Capacity
	for _, v := range r.Variants {
		var best *Step
		for i := range r.Steps {
			st := &r.Steps[i]
			if st.Variant != v || st.Err != "" || st.LostUpdates > 0 || len(st.CrossCheck) > 0 {
				continue
			}
			if best == nil || st.Sales > best.Sales {
				best = st
			}
		}
		if best == nil || best.Sales == 0 {
			continue
		}
		sale := best.Summary.Latency[traffic.OutcomeSale]
		c := Capacity{Variant: v, Sales: best.Sales, Offered: best.Rate, P99: sale.P99}
		if n := best.Summary.Counts.Requests; n > 0 {
			c.Shed = 100 * float64(best.Summary.Latency[traffic.OutcomeShed].Count) / float64(n)
		}
		// "p99 < X ms": X is the next whole millisecond above the p99.
		under := math.Floor(float64(sale.P99)/float64(time.Millisecond)) + 1
		c.Line = fmt.Sprintf("%s sells %.0f/s at p99 < %.0f ms (offered %d/s, %.0f %% shed) on this machine (%d cores, load average %s)",
			v, c.Sales, under, c.Offered, c.Shed, runtime.NumCPU(), r.LoadAfter)
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
