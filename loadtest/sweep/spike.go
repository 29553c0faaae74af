package sweep

import (
	"fmt"
	"slices"
	"time"

	"flashsale/loadtest/output"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// A spike.
//
// Rates that rise and fall in one run (-sweep-rates 1000,2000,4000,8000,1000)
// ask what a flash sale asks: when the crowd outruns the store, does the
// variant keep selling at what it sold before (goodput flat), does it answer
// everyone in time (no answer later than the lock wait plus LateMargin), do
// the shoppers' connections hold (no transport errors: refused, exhausted
// file descriptors), and does it come back when the crowd goes (the step
// after the spike against the step before)? The figures are ratios within
// one run, so a busy machine moves both sides.

// LateMargin is what an answer may take past the lock-wait budget and still
// count as in time: the critical section of a request that got its lease at
// the last moment (budget.go in inventory), with room for a loaded machine.
const LateMargin = 250 * time.Millisecond

// The spike profile (the load runner's -spike): the rates of a flash sale,
// rising to 8× the first and back, offered to the correct rungs batched,
// with no lock as the reference.
var (
	SpikeRates    = []int{1000, 2000, 4000, 8000, 1000}
	SpikeVariants = []string{ladder.None, lock.Lua, lock.Redlock, lock.RedlockFence}
)

// Spike targets, as ratios in the same run.
const (
	// SpikeWant is the least share of its plateau a variant sells at the peak.
	SpikeWant = 0.8
	// BeyondWant is that share at a peak beyond the machine (Spike.Beyond),
	// where the late answers are not judged: the cores a lease's hand-offs
	// need are taken by answering, as on a machine with one core kept busy.
	BeyondWant = 0.5
	// LateWant is the most share of requests answered later than the budget
	// plus LateMargin.
	LateWant = 0.001
	// RecoveryWant is the most the p99 of the step after the spike may be,
	// against the step before.
	RecoveryWant = 2.0
)

// Spike is one variant's spike: its peak against its plateau, what came
// late, and how it recovered.
type Spike struct {
	Variant string `json:"variant"`
	// PeakRate is the highest offered rate; Peak its sales/s.
	PeakRate int     `json:"peak_rate"`
	Peak     float64 `json:"peak_sales_per_second"`
	// Plateau is the most sales/s at any lower rate of the run; Ratio is
	// Peak/Plateau.
	Plateau float64 `json:"plateau_sales_per_second"`
	Ratio   float64 `json:"ratio"`
	// Late is the answers later than the budget plus LateMargin over the
	// whole run, of Requests; Transport the requests that got no answer.
	Late      int `json:"late"`
	Requests  int `json:"requests"`
	Transport int `json:"transport_errors"`
	// Before and After are the p99 of the steps just before and just after
	// the peak; Recovery is After/Before.
	Before   time.Duration `json:"p99_before_ns"`
	After    time.Duration `json:"p99_after_ns"`
	Recovery float64       `json:"recovery"`
	// Met says whether every target above held.
	Met bool `json:"met"`
	// BareLate is the bare exchanges answered later than the budget plus
	// LateMargin at the peak rate, of BareRequests (bare.go). Beyond says
	// that their share passed LateWant: the machine itself could not answer
	// the peak in time, so no lock could, and the spike is held to
	// BeyondWant with its late answers reported but not judged.
	BareLate     int  `json:"bare_late"`
	BareRequests int  `json:"bare_requests"`
	Beyond       bool `json:"beyond_the_machine"`
}

// Missed are the variants, other than the reference (no lock), whose spike
// missed a target.
func (r *Report) Missed() []string {
	var out []string
	for _, s := range r.Spikes {
		if !s.Met && s.Variant != ladder.None {
			out = append(out, s.Variant)
		}
	}
	return out
}

// want is the least share of its plateau the spike must sell at its peak.
func (s Spike) want() float64 {
	if s.Beyond {
		return BeyondWant
	}
	return SpikeWant
}

// LateShare is Late over Requests.
func (s Spike) LateShare() float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Late) / float64(s.Requests)
}

// at is the step of the vi-th variant at the ri-th rate: rates may repeat
// (a spike comes back down), so steps are found by place, not by rate.
func (r *Report) at(vi, ri int) *Step {
	if i := vi*len(r.Rates) + ri; i < len(r.Steps) && r.Steps[i].Variant == r.Variants[vi] {
		return &r.Steps[i]
	}
	return nil
}

// peak is the place of the highest of rates when they rise to it and fall
// after it; 0 when they do not.
func peak(rates []int) int {
	top := 0
	for i, rate := range rates {
		if rate > rates[top] {
			top = i
		}
	}
	if top == len(rates)-1 {
		return 0
	}
	return top
}

// spikes are the variants' spikes, when the rates rise to a peak and fall
// after it; none otherwise.
func (r *Report) spikes() []Spike {
	top := peak(r.Rates)
	if top == 0 {
		return nil
	}
	// The bare exchanges at the peak are the same machine for every variant.
	var bare Spike
	if len(r.Bare) == len(r.Rates) && r.Bare[top].Err == "" {
		st := r.Bare[top]
		bare.BareLate, bare.BareRequests = st.Late, st.Summary.Counts.Requests
		bare.Beyond = bare.BareRequests > 0 && float64(bare.BareLate) > LateWant*float64(bare.BareRequests)
	}
	var out []Spike
	for vi, v := range r.Variants {
		steps := make([]*Step, len(r.Rates))
		for ri := range r.Rates {
			if steps[ri] = ok(r.at(vi, ri)); steps[ri] == nil {
				steps = nil
				break
			}
		}
		if steps == nil {
			continue
		}
		s := bare
		s.Variant, s.PeakRate, s.Peak = v, r.Rates[top], steps[top].Sales
		s.Before, s.After = steps[top-1].Summary.P99, steps[top+1].Summary.P99
		for ri, st := range steps {
			if r.Rates[ri] < s.PeakRate {
				s.Plateau = max(s.Plateau, st.Sales)
			}
			s.Late += st.Late
			s.Requests += st.Summary.Counts.Requests
			s.Transport += st.Summary.Counts.Transport
		}
		if s.Plateau > 0 {
			s.Ratio = s.Peak / s.Plateau
		}
		if s.Before > 0 {
			s.Recovery = float64(s.After) / float64(s.Before)
		}
		s.Met = s.Ratio >= s.want() && (s.Beyond || s.LateShare() <= LateWant) && s.Transport == 0 && s.Recovery <= RecoveryWant
		out = append(out, s)
	}
	return out
}

// spikeLine says one spike in a line, with the targets it is held to.
func spikeLine(s Spike) string {
	verdict := "not met"
	if s.Met {
		verdict = "met"
	}
	late := fmt.Sprintf("want ≤ %.1f %%", 100*LateWant)
	beyond := ""
	if s.Beyond {
		late = "not judged"
		beyond = fmt.Sprintf("; beyond this machine: %d of its %d bare exchanges (%s) at %d/s came late too", s.BareLate, s.BareRequests, Bare, s.PeakRate)
	}
	return fmt.Sprintf("spike %s: %.0f sales/s at %d/s = %.2f× its plateau of %.0f (want ≥ %.1f×); late %d of %d (%.3f %%, %s); "+
		"transport errors %d (want 0); p99 after the spike %s vs %s before = %.1f× (want ≤ %.0f×)%s: %s",
		s.Variant, s.Peak, s.PeakRate, s.Ratio, s.Plateau, s.want(), s.Late, s.Requests, 100*s.LateShare(), late,
		s.Transport, output.Millis(s.After), output.Millis(s.Before), s.Recovery, RecoveryWant, beyond, verdict)
}

// rising reports whether the rates only rise: then the sales chart's x axis
// is the offered rate; otherwise it is the step.
func (r *Report) rising() bool {
	return slices.IsSorted(r.Rates) && len(slices.Compact(slices.Clone(r.Rates))) == len(r.Rates)
}
