// Package handlers is the storefront's HTTP layer on Gin: the shopper API,
// the admin API, the live stream, health and metrics. Every route is listed
// in routes.go; handlers return errors, and errors.go renders them from one
// table of codes.
package handlers

import (
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"flashsale/internal/broker"
	"flashsale/inventory"
	"flashsale/lock"
)

// Config is what a Server needs.
type Config struct {
	Inventory *inventory.Service
	Lockers   *lock.Lockers
	Metrics   *Metrics
	Broker    *broker.Broker
	// AdminToken guards /api/admin/*. It must not be empty.
	AdminToken string
	// DefaultLock is the variant used when a request names none.
	DefaultLock string
	Logger      *slog.Logger
	// Heartbeat is how often an idle stream gets a comment. Default 15s.
	Heartbeat time.Duration
	// Workshop runs load-runner cells for the workshop page. Default: none,
	// so the run list is empty and a run fails with a logged 500.
	Workshop WorkshopRunner
}

// Server is the storefront's http.Handler.
type Server struct {
	inv         *inventory.Service
	lockers     *lock.Lockers
	metrics     *Metrics
	broker      *broker.Broker
	adminHash   [sha256.Size]byte
	defaultLock string
	log         *slog.Logger
	heartbeat   time.Duration
	engine      *gin.Engine
	workshop    WorkshopRunner
}

// NewServer checks the configuration and builds the routes.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Inventory == nil || cfg.Lockers == nil || cfg.Metrics == nil || cfg.Broker == nil {
		return nil, errors.New("handlers: Inventory, Lockers, Metrics and Broker are required")
	}
	if cfg.AdminToken == "" {
		return nil, errors.New("handlers: an admin token is required")
	}
	if _, err := cfg.Lockers.Get(cfg.DefaultLock); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	// Gin keeps its mode process-wide; debug mode only prints route tables
	// and warnings to stdout, which a service and its tests never want.
	gin.SetMode(gin.ReleaseMode)
	s := &Server{
		inv: cfg.Inventory, lockers: cfg.Lockers, metrics: cfg.Metrics, broker: cfg.Broker,
		adminHash: sha256.Sum256([]byte(cfg.AdminToken)), defaultLock: cfg.DefaultLock,
		log: cfg.Logger, heartbeat: cfg.Heartbeat, workshop: cfg.Workshop,
	}
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	_ = e.SetTrustedProxies(nil) // never take a client address from headers
	e.Use(s.logRequests, s.metrics.observeRequests, gin.CustomRecoveryWithWriter(io.Discard, s.recovered))
	s.engine = e
	s.routes()
	return s, nil
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
	s.log.Log(c.Request.Context(), logLevel(status), "request",
		"method", c.Request.Method, "path", c.Request.URL.Path, "route", route(c),
		"status", status, "bytes", c.Writer.Size(), "duration", time.Since(start))
}
