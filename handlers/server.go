// Package handlers is the storefront's HTTP layer on Gin: the shopper API,
// the admin API, the live stream, health and metrics. Every route is listed
// in routes.go; handlers return errors, and errors.go renders them from one
// table of codes.
package handlers

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"flashsale/curriculum"
	"flashsale/internal/broker"
	"flashsale/internal/fault"
	"flashsale/inventory"
	"flashsale/lock"
)

// Config is what a Server needs.
type Config struct {
	Inventory *inventory.Service
	Lockers   *lock.Client
	// Faults is the fault plan the lockers' trace asks (locktap.Tap), set
	// and read by /api/admin/faults. Default: a plan of its own, which no
	// locker asks.
	Faults *fault.Plan
	// LockTTL, Watchdog and FastOff are the lock options Lockers was made
	// with: GET /api tells the TTL, and the admin's switches start from
	// the others. LockTTL defaults to the lock's default, 2s.
	LockTTL           time.Duration
	Watchdog, FastOff bool
	Metrics           *Metrics
	Broker            *broker.Broker
	// AdminToken guards /api/admin/*. It must not be empty.
	AdminToken string
	// DefaultLock is the variant used when a request names none.
	DefaultLock string
	// LockWait is how long a sale waits for a busy lock (the app's
	// -lock-wait), told in GET /api so a load runner sizes its faults from
	// the instance rather than from a guess. Zero: not told.
	LockWait time.Duration
	Logger   *slog.Logger
	// Heartbeat is how often an idle stream gets a comment. Default 15s.
	Heartbeat time.Duration
	// Workshop runs load-runner cells for the workshop page. Default: none,
	// so the run list is empty and a run fails with a logged 500.
	Workshop WorkshopRunner
	// Variants are the lock variants a request (or a workshop run) may
	// name; DefaultLock must be one. Default: every variant.
	Variants []string
	// MaxStreams bounds the open server-sent event streams (live and
	// workshop), MaxStreamsPerClient those of one client address. Defaults
	// DefaultMaxStreams and DefaultMaxStreamsPerClient.
	MaxStreams, MaxStreamsPerClient int
	// OrderRate is how many orders and seat grabs a second one client
	// address may send, in bursts of OrderBurst (default DefaultOrderBurst).
	// Zero: no limit.
	OrderRate  float64
	OrderBurst int
	// BodyTimeout is how long a request may take to send its body.
	// Default DefaultBodyTimeout.
	BodyTimeout time.Duration
	// AuditInterval is how long the public audit summary is served from
	// the last real audit: at most one real audit per interval. Default
	// DefaultAuditInterval.
	AuditInterval time.Duration
	// MaxInFlight bounds the sales (orders and seat grabs) this instance
	// works on at once; the rest are answered 503 overloaded at once. The
	// bound adapts below it to how fast sales are answered (admission.go).
	// Default DefaultMaxInFlight; negative: no bound.
	MaxInFlight int
	// InFlightTarget is how long an admitted sale may take before the bound
	// shrinks. Default DefaultInFlightTarget.
	InFlightTarget time.Duration
	// TrustedProxies are the addresses or CIDR ranges of proxies whose
	// X-Forwarded-For and X-Real-IP name the client. Default: none, so the
	// client is the peer address.
	TrustedProxies []string
	// OpenLadder lets every client name the broken rungs among Variants in
	// X-Lock-Variant. Off, only this machine's own clients (IsOwnMachine)
	// and requests with the admin token may; the room gets 400
	// variant_not_allowed (room.go).
	OpenLadder bool
	// OrderRateSparesOwnMachine exempts this machine's own clients from
	// OrderRate: the load runner and the labs on the facilitator's machine
	// send as fast as they like while the room is held to the rate.
	OrderRateSparesOwnMachine bool
	// LockSource holds package lock's files at its root, for the workshop
	// page to show a rung's code (web.Options.LockSource). Default: none,
	// so a lock rung's source answers 404.
	LockSource fs.FS
}

// Server is the storefront's http.Handler.
type Server struct {
	inv         *inventory.Service
	lockers     *lock.Client
	faults      *fault.Plan
	lockTTL     time.Duration
	watchdog    atomic.Bool // the lockers' watchdog switch, as last set
	fast        atomic.Bool // the lockers' speed layer switch, as last set
	metrics     *Metrics
	broker      *broker.Broker
	adminHash   [sha256.Size]byte
	defaultLock string
	lockWait    time.Duration
	log         *slog.Logger
	heartbeat   time.Duration
	engine      *gin.Engine
	workshop    WorkshopRunner
	variants    []string
	streams     *streamLimit
	orders      *rateLimit // nil: no order rate limit
	// ordersSpareOwnMachine: this machine's own clients pass limitOrders.
	ordersSpareOwnMachine bool
	openLadder            bool
	logins                *rateLimit // failed admin logins per client
	inFlight              *inFlight  // nil: no bound on the sales in flight
	bodyTimeout           time.Duration
	audits                *auditCache
	lockSource            fs.FS
	// closing is closed when shutdown begins: every stream ends.
	closing   chan struct{}
	closeOnce sync.Once
	// draining is set by Drain: /readyz answers 503 from then on.
	draining atomic.Bool
}

// NewServer checks the configuration and builds the routes.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Inventory == nil || cfg.Lockers == nil || cfg.Metrics == nil || cfg.Broker == nil {
		return nil, errors.New("handlers: Inventory, Lockers, Metrics and Broker are required")
	}
	if cfg.AdminToken == "" {
		return nil, errors.New("handlers: an admin token is required")
	}
	if _, err := cfg.Lockers.Locker(cfg.DefaultLock); err != nil {
		return nil, err
	}
	if cfg.Variants == nil {
		cfg.Variants = curriculum.Names()
	}
	for _, v := range cfg.Variants {
		if _, err := cfg.Lockers.Locker(v); err != nil {
			return nil, err
		}
	}
	if !slices.Contains(cfg.Variants, cfg.DefaultLock) {
		return nil, fmt.Errorf("handlers: the default variant %q is not among the allowed ones (%s)", cfg.DefaultLock, strings.Join(cfg.Variants, ", "))
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxStreamsPerClient <= 0 {
		cfg.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if cfg.OrderBurst <= 0 {
		cfg.OrderBurst = DefaultOrderBurst
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.AuditInterval <= 0 {
		cfg.AuditInterval = DefaultAuditInterval
	}
	if cfg.OrderRate < 0 {
		return nil, fmt.Errorf("handlers: the order rate must not be negative, got %v", cfg.OrderRate)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = 2 * time.Second
	}
	if cfg.Faults == nil {
		cfg.Faults = fault.NewPlan()
	}
	// Gin keeps its mode process-wide; debug mode only prints route tables
	// and warnings to stdout, which a service and its tests never want.
	gin.SetMode(gin.ReleaseMode)
	s := &Server{
		inv: cfg.Inventory, lockers: cfg.Lockers, faults: cfg.Faults, lockTTL: cfg.LockTTL, metrics: cfg.Metrics, broker: cfg.Broker,
		adminHash: sha256.Sum256([]byte(cfg.AdminToken)), defaultLock: cfg.DefaultLock, lockWait: cfg.LockWait,
		log: cfg.Logger, heartbeat: cfg.Heartbeat, workshop: cfg.Workshop,
		variants:    slices.Clone(cfg.Variants),
		streams:     &streamLimit{max: cfg.MaxStreams, perClient: cfg.MaxStreamsPerClient, byClient: map[string]int{}},
		bodyTimeout: cfg.BodyTimeout,
		audits:      newAuditCache(cfg.AuditInterval),
		lockSource:  cfg.LockSource,
		closing:     make(chan struct{}),

		ordersSpareOwnMachine: cfg.OrderRateSparesOwnMachine,
		openLadder:            cfg.OpenLadder,
		logins:                newLoginLimit(),
	}
	s.watchdog.Store(cfg.Watchdog)
	s.fast.Store(!cfg.FastOff)
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.InFlightTarget <= 0 {
		cfg.InFlightTarget = DefaultInFlightTarget
	}
	if cfg.MaxInFlight > 0 {
		s.inFlight = newInFlight(cfg.MaxInFlight, cfg.InFlightTarget, cfg.Metrics.setInFlight)
	}
	if cfg.OrderRate > 0 {
		s.orders = &rateLimit{every: rate.Limit(cfg.OrderRate), burst: cfg.OrderBurst, clients: map[string]*rate.Limiter{}}
	}
	cfg.Metrics.saleVariant = s.saleVariant
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	// Without trusted proxies the client is the peer: a header never names it.
	if err := e.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("handlers: trusted proxies: %w", err)
	}
	e.Use(secureHeaders, s.logRequests, s.metrics.observeRequests, gin.CustomRecoveryWithWriter(io.Discard, s.recovered), s.bodyDeadline)
	s.engine = e
	s.routes()
	return s, nil
}

// saleVariant is the metrics' variant label of a sale request: the variant
// it ran under, or "other" for a name this instance refused (a name from a
// client must not mint a series).
func (s *Server) saleVariant(c *gin.Context) string {
	v, err := s.variant(c)
	if err != nil {
		return "other"
	}
	return v
}

// Drain makes /readyz answer 503 draining from now on, while every other
// route is served as before: a load balancer that checks /readyz stops
// sending new requests here before the server stops accepting them.
func (s *Server) Drain() { s.draining.Store(true) }

// CloseStreams ends every open stream (live and workshop) and refuses new
// ones. Register it with http.Server.RegisterOnShutdown: a stream never
// ends by itself, so it would hold a graceful shutdown for its whole
// timeout.
func (s *Server) CloseStreams() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.broker.CloseStreams()
}

// ServeHTTP serves the storefront.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.engine.ServeHTTP(w, r) }

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(*gin.Context) error

// handle adapts a handlerFunc: its error is rendered by render, in one place.
func (s *Server) handle(h handlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			s.render(c, err)
		}
	}
}

// logRequests logs every finished request: 5xx as warnings, the rest at
// debug level so a load run does not drown the log.
func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	status := c.Writer.Status()
	// Checked first, as in render: at a spike's peak most answers are shed
	// ones, logged at debug level, and the line's fields would be built
	// for nothing thousands of times a second.
	ctx, level := c.Request.Context(), logLevel(status, c.GetBool(shedKey))
	if !s.log.Enabled(ctx, level) {
		return
	}
	s.log.Log(ctx, level, "request",
		"method", c.Request.Method, "path", c.Request.URL.Path, "route", route(c),
		"status", status, "bytes", c.Writer.Size(), "duration", time.Since(start))
}
