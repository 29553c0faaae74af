package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"flashsale/internal/locktap"
	"flashsale/inventory"
)

// Metrics are the storefront's Prometheus metrics on a registry of their own:
// several servers in one test process must not collide on the global one.
type Metrics struct {
	registry *prometheus.Registry
	text     http.Handler

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	sales    *prometheus.HistogramVec
	// saleVariant names the variant a sale request ran under, one of the
	// instance's allowed variants or "other", so the label stays bounded.
	saleVariant func(*gin.Context) string
	lockAcquire *prometheus.HistogramVec
	lockTries   *prometheus.HistogramVec
	lockHold    *prometheus.HistogramVec
	leasesLost  *prometheus.CounterVec
	faultsFired *prometheus.CounterVec
	streamLive  prometheus.Gauge
	streamDrops prometheus.Counter
	audit       map[string]prometheus.Gauge // by figure: ok, sold_units, …
	audits      *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	inFlight    prometheus.Gauge // sales admitted and not yet answered
	inFlightMax prometheus.Gauge // the adaptive bound on them now
}

// auditFigures are the audit's figures exported as flashsale_audit_<figure>.
var auditFigures = []string{"ok", "sold_units", "orders", "oversold_units", "lost_updates", "double_booked_seats", "stuck_locks"}

// NewMetrics registers every metric, plus the Go runtime and process
// collectors, on a fresh registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	// The scheduler's metrics include go_sched_latencies_seconds: how long a
	// runnable goroutine waited for the CPU, the first sign of an instance
	// past its cores (a lock hand-off waits that long at every step).
	f(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)))
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lockBuckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &Metrics{
		registry: r,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_http_requests_total", Help: "HTTP requests by route template and status code (499: client went away).",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashsale_http_request_duration_seconds", Help: "HTTP request latency by route template.", Buckets: lockBuckets,
		}, []string{"route"}),
		sales: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashsale_sale_duration_seconds",
			Help:    "Latency of orders and seat grabs by lock variant (an allowed one, or other) and outcome: sale (2xx), refused (4xx but 429), shed (503, 429), error.",
			Buckets: lockBuckets,
		}, []string{"variant", "outcome"}),
		lockAcquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashsale_lock_acquire_seconds", Help: "Time spent acquiring a lock, by variant and outcome (acquired, busy, unavailable, crashed).", Buckets: lockBuckets,
		}, []string{"variant", "outcome"}),
		lockTries: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashsale_lock_tries", Help: "Acquire attempts per acquire call, by variant.", Buckets: []float64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89},
		}, []string{"variant"}),
		lockHold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashsale_lock_hold_seconds", Help: "Time from grant to release of a lease, by variant.", Buckets: lockBuckets,
		}, []string{"variant"}),
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_lock_leases_lost_total", Help: "Leases the watchdog could not keep alive, by variant.",
		}, []string{"variant"}),
		faultsFired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_faults_fired_total", Help: "Injected faults that fired, by point and action.",
		}, []string{"point", "action"}),
		streamLive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flashsale_stream_clients", Help: "Open server-sent event streams on this instance.",
		}),
		streamDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashsale_stream_dropped_total", Help: "Changes not delivered to a stream client that was too slow, or not published because Redis was unreachable.",
		}),
		audit: map[string]prometheus.Gauge{},
		audits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_audits_total", Help: "Audit answers by source: run (a real audit of the database and the Redis nodes) or cache (the public summary served from the last one).",
		}, []string{"source"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_limit_refusals_total", Help: "Requests refused by a limit: streams, streams_per_client, order_rate, body_timeout, variant, in_flight.",
		}, []string{"limit"}),
	}
	for _, l := range limitNames {
		m.refusals.WithLabelValues(l)
	}
	for _, src := range []string{"run", "cache"} {
		m.audits.WithLabelValues(src)
	}
	for _, fig := range auditFigures {
		help := "The " + fig + " figure of the last GET /api/audit."
		if fig == "ok" {
			help = "1 if the last GET /api/audit found every invariant kept, else 0."
		}
		m.audit[fig] = prometheus.NewGauge(prometheus.GaugeOpts{Name: "flashsale_audit_" + fig, Help: help})
		f(m.audit[fig])
	}
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "flashsale_sales_in_flight", Help: "Orders and seat grabs this instance is working on now."})
	m.inFlightMax = prometheus.NewGauge(prometheus.GaugeOpts{Name: "flashsale_sales_in_flight_limit", Help: "The adaptive bound on the sales in flight now (-max-in-flight at most); past it a sale is answered 503 overloaded."})
	f(m.inFlight)
	f(m.inFlightMax)
	m.text = promhttp.HandlerFor(r, promhttp.HandlerOpts{Registry: r})
	f(m.requests)
	f(m.duration)
	f(m.sales)
	f(m.lockAcquire)
	f(m.lockTries)
	f(m.lockHold)
	f(m.leasesLost)
	f(m.faultsFired)
	f(m.streamLive)
	f(m.streamDrops)
	f(m.audits)
	f(m.refusals)
	return m
}

// Registry is where the metrics live, for a caller that adds its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// ObserveLock records one lock event. It is the lock package's observer
// (locktap.Tap.Observer) and, like it must be, never blocks.
func (m *Metrics) ObserveLock(e locktap.Event) {
	switch e.Kind {
	case locktap.Acquired, locktap.Busy, locktap.Unavailable, locktap.Crashed:
		m.lockAcquire.WithLabelValues(e.Variant, string(e.Kind)).Observe(e.Wait.Seconds())
		if e.Tries > 0 {
			m.lockTries.WithLabelValues(e.Variant).Observe(float64(e.Tries))
		}
	case locktap.Released:
		if e.Lease != nil {
			m.lockHold.WithLabelValues(e.Variant).Observe(e.Time.Sub(e.Lease.Acquired()).Seconds())
		}
	case locktap.Lost:
		m.leasesLost.WithLabelValues(e.Variant).Inc()
	case locktap.FaultFired:
		if e.Fault != nil {
			m.faultsFired.WithLabelValues(string(e.Fault.Point), string(e.Fault.Action)).Inc()
		}
	}
}

// WatchInventory exports the sale's counters: stale-fence rejections above all,
// the proof that fencing caught a holder whose lease had run out.
func (m *Metrics) WatchInventory(s *inventory.Service) {
	st := s.Stats()
	for _, c := range []struct {
		name, help string
		load       func() uint64
	}{
		{"flashsale_stale_fence_rejections_total", "Writes refused because a newer fencing token was registered on the row.", st.StaleFence.Load},
		{"flashsale_db_guard_rejections_total", "Writes refused by a production-mode database guard (a lock failure the database caught).", st.GuardRejections.Load},
		{"flashsale_lock_release_errors_total", "Releases that failed after the critical section (the sale stands).", st.ReleaseErrors.Load},
		{"flashsale_holder_crashes_total", "Requests abandoned by an injected crash.", st.Crashes.Load},
		{"flashsale_batches_total", "Batches sold under one lease each (-batch).", st.Batches.Load},
		{"flashsale_batched_orders_total", "Orders served in batches (-batch); divided by flashsale_batches_total, the mean batch.", st.BatchedOrders.Load},
	} {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(c.load()) }))
	}
}

// setInFlight publishes the sales in flight and the bound on them.
func (m *Metrics) setInFlight(n int, limit float64) {
	m.inFlight.Set(float64(n))
	m.inFlightMax.Set(limit)
}

// StreamDropped counts a change a stream missed; it is the broker's onDrop.
func (m *Metrics) StreamDropped() { m.streamDrops.Inc() }

// SetAudit publishes the figures of an audit.
func (m *Metrics) SetAudit(a inventory.Audit) {
	var ok int64
	if a.OK {
		ok = 1
	}
	for name, v := range map[string]int64{
		"ok": ok, "sold_units": a.SoldUnits, "orders": a.Orders, "oversold_units": a.OversoldUnits,
		"lost_updates": a.LostUpdates, "double_booked_seats": a.DoubleBookedSeats, "stuck_locks": int64(a.StuckLocks),
	} {
		m.audit[name].Set(float64(v))
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.text }

// observeRequests is the middleware that counts and times every request by
// its route template, so /api/events/gala/seats/A1 and …/A2 are one series.
func (m *Metrics) observeRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	r := route(c)
	took := time.Since(start).Seconds()
	status := c.Writer.Status()
	m.requests.WithLabelValues(r, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(r).Observe(took)
	if saleRoutes[r] && m.saleVariant != nil {
		m.sales.WithLabelValues(m.saleVariant(c), saleOutcome(status)).Observe(took)
	}
}

// saleRoutes are the route templates whose latency is told by variant and
// outcome.
var saleRoutes = map[string]bool{"/api/orders": true, "/api/events/:event/seats/:seat": true}

// saleOutcome classes a sale's status as the load runner's reports do: a
// p99 over sales and sub-millisecond 503s together describes neither.
func saleOutcome(status int) string {
	switch {
	case status/100 == 2:
		return "sale"
	case status == StatusClientClosedRequest:
		return "error" // nobody was left to be answered
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		return "shed"
	case status/100 == 4:
		return "refused"
	default:
		return "error"
	}
}

// route is the matched route template, or "unmatched".
func route(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return "unmatched"
}
