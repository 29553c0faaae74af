package handlers

import (
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// Admission control.
//
// Past the store's pace a sale admitted beyond what the instance can serve
// sells nothing more: it waits in a longer line, holds a goroutine, memory
// and the CPU the admitted ones need, and comes back late. So each instance
// bounds the sales (orders and seat grabs) it works on at once, and answers
// the rest 503 overloaded with Retry-After at once, before any Redis
// command or transaction.
//
// The bound adapts, in the manner of the AIMD limit of Netflix's
// concurrency-limits: it starts at MaxInFlight; an admitted sale that took
// longer than the target (or was answered lock_busy: its budget ran out
// waiting) takes a tenth off it, and every one in time, while the bound was
// at least half used, adds one, up to MaxInFlight again. Slow answers come
// in crowds (a stall delays every sale in flight), so as in TCP's
// congestion control one cut is made per round: a sale admitted before the
// last cut cannot cut again. When the instance (or the machine under it)
// slows, fewer sales compete for it and each is answered in time; when it
// keeps up, the bound climbs back. It never goes below a quarter of
// MaxInFlight.
//
// A batched order (inventory's batching under one lease) never cuts it.
// While it waits for its batch it is parked in its SKU's queue: no lock
// round trip, no transaction, no CPU, and it leaves at its deadline. When
// batched orders come slow, the lease's hand-offs between instances are
// slow (at a spike, every core is busy answering), and the bound is the
// most the next lease can sell: cutting it makes every batch smaller and
// every sale slower still. At 8000/s on two cores, bounds cut to their
// least sold 0.12–0.37× the plateau, bounds held at their most 0.23–0.66×
// (docs/performance.md).

// DefaultInFlightTarget is how long an admitted sale may take before the
// in-flight bound shrinks: a quarter of the default lock wait.
const DefaultInFlightTarget = 250 * time.Millisecond

// inFlight is the adaptive bound on the sales in flight.
type inFlight struct {
	max    int
	target time.Duration

	mu    sync.Mutex
	n     int     // admitted and not yet answered
	limit float64 // the bound now, from floor() to max
	cuts  uint64  // how often the bound was cut: the round a sale is admitted in

	observe func(n int, limit float64) // the metrics' gauges; called under mu
}

// floor is the least the bound falls to: a quarter of the most, at least 1.
func (l *inFlight) floor() float64 { return float64(max(l.max/4, 1)) }

func newInFlight(max int, target time.Duration, observe func(n int, limit float64)) *inFlight {
	if observe == nil {
		observe = func(int, float64) {}
	}
	observe(0, float64(max))
	return &inFlight{max: max, target: target, limit: float64(max), observe: observe}
}

// admit takes a place under the bound, or says how many are in flight and
// what the bound is now; done gives the place back with how the sale went:
// how long it took, whether its budget ran out, whether it was batched.
func (l *inFlight) admit() (done func(took time.Duration, late, batched bool), n, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= int(l.limit) {
		return nil, l.n, int(l.limit)
	}
	l.n++
	l.observe(l.n, l.limit)
	round := l.cuts
	return func(took time.Duration, late, batched bool) { l.done(round, took, late, batched) }, l.n, int(l.limit)
}

func (l *inFlight) done(round uint64, took time.Duration, late, batched bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	used := l.n
	l.n--
	switch {
	case late || took > l.target:
		if round == l.cuts && !batched {
			l.limit = max(l.limit*0.9, l.floor())
			l.cuts++
		}
	case 2*used >= int(l.limit):
		l.limit = min(l.limit+1, float64(l.max))
	}
	l.observe(l.n, l.limit)
}

// admitSales holds the sale routes to the in-flight bound. With no bound
// it lets everything through.
func (s *Server) admitSales(c *gin.Context) error {
	if s.inFlight == nil {
		c.Next()
		return nil
	}
	done, n, limit := s.inFlight.admit()
	if done == nil {
		return errorf("overloaded", "%d sales in progress on this instance, its bound now %d", n, limit)
	}
	start := time.Now()
	c.Next()
	done(time.Since(start), c.Writer.Status() == http.StatusServiceUnavailable && c.GetBool(shedKey), c.GetBool(batchedKey))
	return nil
}

// batchedKey marks an order that joined its SKU's batch queue, for
// admitSales.
const batchedKey = "flashsale.batched"
