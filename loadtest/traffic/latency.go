package traffic

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The outcomes latency is told by. One percentile over every answer mixes a
// sale that waited for its lock with a 503 turned away in a microsecond, and
// says nothing true of either.
const (
	// OutcomeSale is a 2xx that confirmed its Idempotency-Key for the first
	// time: an order or a booking made.
	OutcomeSale = "sale"
	// OutcomeReplay is a 2xx to a key already confirmed: a resend answered
	// from the stored record, no lock and no stock read. Its latency says
	// nothing of the sale, so it is kept apart.
	OutcomeReplay = "replay"
	// OutcomeRefused is a 4xx other than 429: sold_out, seat_taken,
	// stale_fence, lease_lost, bad input. The request was decided.
	OutcomeRefused = "refused"
	// OutcomeShed is a 503 or a 429: lock_busy, overloaded,
	// lock_unavailable, rate_limited … turned away, to be retried.
	OutcomeShed = "shed"
	// OutcomeError is any other answer, or none (a transport error).
	OutcomeError = "error"
)

// Outcomes are the outcomes in the order reports show them.
var Outcomes = []string{OutcomeSale, OutcomeReplay, OutcomeRefused, OutcomeShed, OutcomeError}

// OutcomeOf classes an HTTP status (0: no answer). A 2xx is a sale here:
// only the tally, which knows the keys already confirmed, tells a replay.
func OutcomeOf(code uint16) string {
	switch {
	case code/100 == 2:
		return OutcomeSale
	case code == 503 || code == 429:
		return OutcomeShed
	case code/100 == 4:
		return OutcomeRefused
	default:
		return OutcomeError
	}
}

// Percentiles are exact order statistics of one outcome's latencies
// (nearest rank over every sample, no estimate): what a load tester reads
// off an HDR histogram.
type Percentiles struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p99_9_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Latencies keeps every latency of an attack by outcome, eight bytes a
// request, so its percentiles are exact.
type Latencies struct {
	by map[string][]time.Duration
}

// Add records one answer's latency under its outcome.
func (l *Latencies) Add(outcome string, d time.Duration) {
	if l.by == nil {
		l.by = map[string][]time.Duration{}
	}
	l.by[outcome] = append(l.by[outcome], d)
}

// ByOutcome is the percentiles of every outcome that occurred.
func (l *Latencies) ByOutcome() map[string]Percentiles {
	out := map[string]Percentiles{}
	for o, ds := range l.by {
		out[o] = PercentilesOf(ds)
	}
	return out
}

// PercentilesOf sorts ds and reads its percentiles.
func PercentilesOf(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		return ds[max(0, min(i, len(ds)-1))]
	}
	return Percentiles{Count: len(ds), P50: at(0.50), P90: at(0.90), P99: at(0.99), P999: at(0.999), Max: ds[len(ds)-1]}
}

// OmissionNote says what the latencies are and are not, for every report
// that shows them: vegeta's open model sends on schedule whatever the
// answers do, but only up to its worker cap; past it a request waits for a
// worker before it is sent, and that wait is in no latency (coordinated
// omission).
func OmissionNote(maxWorkers uint64) string {
	return fmt.Sprintf("latency is measured by vegeta from sending a request to reading its answer, per outcome (sale: a 2xx that made an order or booking; replay: a 2xx answered from the record of a key already confirmed; "+
		"refused: 4xx but 429; shed: 503 and 429; error: other or none). The attack is an open model (requests leave on the rate's schedule, not when answers "+
		"come back) with at most %d in flight: while that many wait, later requests leave late, and the time they waited to be sent is not "+
		"in the latencies (coordinated omission), so read the sent rate beside the offered one; past the cap the figures are optimistic", maxWorkers)
}
