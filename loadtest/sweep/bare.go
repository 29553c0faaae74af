package sweep

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The machine's own bound.
//
// At a spike's peak every request must be answered, sold or refused, and
// every answer costs the machine one HTTP exchange whatever the lock: the
// runner's request, the instance's read, routing and write, the kernel's
// loopback both ways. When the machine cannot carry that many exchanges in
// time, no lock can: answers come late because they wait for a core, and
// the lock's hand-offs wait for one too. So a run whose rates rise and fall
// first offers each of them as the bare exchange: GET /healthz, the
// cheapest answer the instances give (no lock, no database, no Redis),
// through the same listener, middleware and kernel, spread over the
// instances like the orders. Where the bare exchanges come late as well,
// the rate is past what this machine answers, and the spike there is not
// the variants' to meet (Spike.Beyond).

// Bare names the bare exchange's row in the report.
const Bare = "GET /healthz"

// bareStep offers rate bare exchanges a second for the step's duration.
// Its Sales stay 0: nothing is sold.
func bareStep(ctx context.Context, cfg Config, fleet storefront.Fleet, rate, n, total int) Step {
	st := Step{Variant: Bare, Rate: rate}
	var targets []vegeta.Target
	for _, base := range fleet.Bases() {
		targets = append(targets, vegeta.Target{Method: http.MethodGet, URL: base + "/healthz"})
	}
	var m vegeta.Metrics
	late, cores, err := offer(ctx, cfg, fleet, vegeta.NewStaticTargeter(targets...), Bare, rate, n, total, m.Add)
	m.Close()
	if err != nil {
		st.Err = err.Error()
		return st
	}
	st.Late, st.Cores = late, cores
	c := traffic.Counts{Requests: int(m.Requests), ByError: map[string]int{}}
	for code, k := range m.StatusCodes {
		switch code {
		case "200":
		case "0":
			c.Transport += k
			c.Other += k
		case "503":
			c.Unavailable += k
		default:
			c.Other += k
			c.ByError["HTTP "+code] += k
		}
	}
	st.Summary = traffic.Summary{Counts: c, P50: m.Latencies.P50, P99: m.Latencies.P99, Duration: m.Duration + m.Wait, Sent: m.Rate, Offered: float64(rate)}
	if c.Requests > 0 {
		st.Unavailable = 100 * float64(c.Unavailable) / float64(c.Requests)
	}
	return st
}

// offer sends rate requests a second from tr to fleet for the step's
// duration, each result to add, with a progress bar named after what is
// offered; it counts the answers later than the lock wait plus LateMargin
// and measures the cores the instances and the runner used meanwhile.
func offer(ctx context.Context, cfg Config, fleet storefront.Fleet, tr vegeta.Targeter, what string, rate, n, total int, add func(*vegeta.Result)) (late int, cores *Cores, err error) {
	requests := uint64(float64(rate) * cfg.Duration.Seconds())
	pacer, err := traffic.CappedPacer(vegeta.Rate{Freq: rate, Per: time.Second}, requests)
	if err != nil {
		return 0, nil, err
	}
	meter := meterCores(ctx, fleet, cfg.nodeURLs)
	bar := traffic.NewBar(cfg.Progress, requests, fmt.Sprintf("[%2d/%d] %-13s × %5d/s", n, total, what, rate))
	inTime := cfg.Local.LockWait + LateMargin
	traffic.Attack(ctx, cfg.workers(rate), tr, pacer, cfg.Duration, fmt.Sprintf("%s@%d", what, rate), func(r *vegeta.Result) {
		add(r)
		if r.Latency > inTime {
			late++
		}
		if bar != nil {
			_ = bar.Add(1) // a progress bar that cannot draw is no reason to stop
		}
	})
	if bar != nil {
		_ = bar.Finish()
	}
	return late, meter.read(ctx), ctx.Err()
}
