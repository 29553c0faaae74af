package traffic

import (
	"testing"
	"time"
)

// The percentiles are nearest-rank order statistics of every sample, and
// each answer counts under its outcome only.
func TestLatencyByOutcome(t *testing.T) {
	var l Latencies
	for i := 1; i <= 1000; i++ {
		l.Add(OutcomeOf(201), time.Duration(i)*time.Millisecond)
	}
	l.Add(OutcomeOf(503), 100*time.Microsecond)
	l.Add(OutcomeOf(429), 200*time.Microsecond)
	l.Add(OutcomeOf(409), 5*time.Millisecond)
	l.Add(OutcomeOf(0), time.Second)
	got := l.ByOutcome()
	want := map[string]Percentiles{
		OutcomeSale:    {Count: 1000, P50: 500 * time.Millisecond, P90: 900 * time.Millisecond, P99: 990 * time.Millisecond, P999: 999 * time.Millisecond, Max: time.Second},
		OutcomeShed:    {Count: 2, P50: 100 * time.Microsecond, P90: 200 * time.Microsecond, P99: 200 * time.Microsecond, P999: 200 * time.Microsecond, Max: 200 * time.Microsecond},
		OutcomeRefused: {Count: 1, P50: 5 * time.Millisecond, P90: 5 * time.Millisecond, P99: 5 * time.Millisecond, P999: 5 * time.Millisecond, Max: 5 * time.Millisecond},
		OutcomeError:   {Count: 1, P50: time.Second, P90: time.Second, P99: time.Second, P999: time.Second, Max: time.Second},
	}
	for o, w := range want {
		if got[o] != w {
			t.Errorf("%s: %+v, want %+v", o, got[o], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("outcomes %v, want %d of them", got, len(want))
	}
}
