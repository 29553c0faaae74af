package handlers

import (
	"context"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"flashsale/inventory"
)

// auditTimeout bounds one real audit.
const auditTimeout = 15 * time.Second

// auditCache holds the last real audit. A real audit scans every Redis node
// for lock keys (a SCAN plus a PTTL per key) and aggregates every order, so
// the public route serves this copy and runs at most one audit per
// interval, one at a time, however many ask.
type auditCache struct {
	every time.Duration
	turn  chan struct{} // held while a real audit runs for the public route

	mu   sync.Mutex
	last inventory.Audit
	at   time.Time // when the last real audit started; zero before the first
}

func newAuditCache(every time.Duration) *auditCache {
	return &auditCache{every: every, turn: make(chan struct{}, 1)}
}

// get returns the cached audit, or runs a new one when the cached one is
// older than the interval. cached says which.
func (a *auditCache) get(ctx context.Context, run func(context.Context) (inventory.Audit, error)) (au inventory.Audit, at time.Time, cached bool, err error) {
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return inventory.Audit{}, time.Time{}, false, context.Cause(ctx)
	}
	defer func() { <-a.turn }()
	if au, at, ok := a.fresh(time.Now()); ok {
		return au, at, true, nil
	}
	start := time.Now()
	au, err = run(ctx)
	if err != nil {
		return inventory.Audit{}, time.Time{}, false, err
	}
	a.put(au, start)
	return au, start, false, nil
}

// fresh is the cached audit if it started less than an interval ago.
func (a *auditCache) fresh(now time.Time) (inventory.Audit, time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at.IsZero() || now.Sub(a.at) >= a.every {
		return inventory.Audit{}, time.Time{}, false
	}
	return a.last, a.at, true
}

// put keeps an audit that started at start, unless a later one is kept.
func (a *auditCache) put(au inventory.Audit, start time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if start.After(a.at) {
		a.last, a.at = au, start
	}
}

// runAudit is one real audit; its figures become the audit gauges.
func (s *Server) runAudit(ctx context.Context) (inventory.Audit, error) {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	a, err := s.inv.Audit(ctx)
	if err != nil {
		return inventory.Audit{}, err
	}
	s.metrics.audits.WithLabelValues("run").Inc()
	s.metrics.SetAudit(a)
	return a, nil
}

// auditSummary is the public audit: the figures of the last real audit, at
// most the audit interval old, without what names the Redis nodes (the
// stuck keys by node, the scan errors; ok already says something is wrong).
type auditSummary struct {
	inventory.Audit
	// AsOf is when the audit was made.
	AsOf time.Time `json:"as_of"`
}

// audit serves GET /api/audit: the cached summary, cheap to ask for.
func (s *Server) audit(c *gin.Context) error {
	a, at, cached, err := s.audits.get(c.Request.Context(), s.runAudit)
	if err != nil {
		return err
	}
	if cached {
		s.metrics.audits.WithLabelValues("cache").Inc()
	}
	a.StuckLockKeys, a.Errors = nil, nil
	c.JSON(200, auditSummary{Audit: a, AsOf: at.UTC()})
	return nil
}

// adminAudit serves GET /api/admin/audit: a real audit now, with every
// detail; the load runner reads it after each cell. It also refreshes the
// public summary.
func (s *Server) adminAudit(c *gin.Context) error {
	start := time.Now()
	a, err := s.runAudit(c.Request.Context())
	if err != nil {
		return err
	}
	s.audits.put(a, start)
	c.JSON(200, a)
	return nil
}
