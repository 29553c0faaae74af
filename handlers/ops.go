package handlers

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// index tells a person who opens the API root where to go. Its routes are
// the engine's own, so the list cannot drift from what is served. It also
// says the lock settings a load runner's faults are sized by (the lease TTL,
// the wait for a busy lock) and the variants a request may name, so a runner
// pointed at this instance reads them instead of assuming its own defaults.
func (s *Server) index(c *gin.Context) error {
	h := gin.H{
		"service":     "flashsale",
		"lock":        s.defaultLock,
		"locks":       s.variants,
		"lock_ttl_ms": s.lockers.TTL().Milliseconds(),
		"routes":      s.routeList(),
	}
	if s.lockWait > 0 {
		h["lock_wait_ms"] = s.lockWait.Milliseconds()
	}
	c.JSON(http.StatusOK, h)
	return nil
}

// routeList is every route the engine serves as "METHOD /path", parameters
// written {name}, sorted by path. HEAD is left out: it mirrors a page's GET.
func (s *Server) routeList() []string {
	var out []string
	for _, r := range s.engine.Routes() {
		if r.Method == http.MethodHead {
			continue
		}
		segs := strings.Split(r.Path, "/")
		for i, seg := range segs {
			if name, ok := strings.CutPrefix(seg, ":"); ok {
				segs[i] = "{" + name + "}"
			}
		}
		out = append(out, r.Method+" "+strings.Join(segs, "/"))
	}
	slices.SortFunc(out, func(a, b string) int {
		_, pa, _ := strings.Cut(a, " ")
		_, pb, _ := strings.Cut(b, " ")
		return cmp.Or(strings.Compare(pa, pb), strings.Compare(a, b))
	})
	return out
}

func (s *Server) healthz(c *gin.Context) error {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
	return nil
}

// readyz is ready when the database answers and a Redis quorum does, and
// the instance is not draining for shutdown.
func (s *Server) readyz(c *gin.Context) error {
	if s.draining.Load() {
		return &Error{Code: "draining"}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	var problems []error
	if err := s.inv.Ping(ctx); err != nil {
		problems = append(problems, errors.New("database: "+err.Error()))
	}
	if err := s.lockers.Ping(ctx); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		err := errors.Join(problems...)
		return &Error{Code: "not_ready", Detail: err.Error(), Err: err}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
	return nil
}

func (s *Server) metricsHandler(c *gin.Context) {
	s.metrics.Handler().ServeHTTP(c.Writer, c.Request)
}
