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
//
// A caller without the admin token is told only what it may use: the
// routes outside /api/admin and the variants it may name (room.go).
func (s *Server) index(c *gin.Context) error {
	admin, err := s.checkAdmin(c)
	if err != nil {
		return err
	}
	routes := s.routeList()
	if !admin {
		routes = slices.DeleteFunc(routes, func(r string) bool { return strings.Contains(r, " /api/admin") })
	}
	h := gin.H{
		"service":     "flashsale",
		"lock":        s.defaultLock,
		"locks":       s.namable(c),
		"lock_ttl_ms": s.lockTTL.Milliseconds(),
		"routes":      routes,
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
	// The answer says what is wrong in counts; which node or database
	// address failed, and why, goes to the log only: the route is public.
	var problems, said []string
	if err := s.inv.Ping(ctx); err != nil {
		problems, said = append(problems, "database: "+err.Error()), append(said, "the database does not answer")
	}
	if err := s.lockers.Ping(ctx); err != nil {
		problems, said = append(problems, err.Error()), append(said, redisCounts(err))
	}
	if len(problems) > 0 {
		return &Error{Code: "not_ready", Detail: strings.Join(said, "; "), Err: errors.New(strings.Join(problems, "; "))}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
	return nil
}

func (s *Server) metricsHandler(c *gin.Context) {
	s.metrics.Handler().ServeHTTP(c.Writer, c.Request)
}

// redisCounts is what a failed ping of the lock's nodes may tell anyone:
// how many nodes answer of how many, and how many are needed (the start
// of lock.Client.Ping's error), never the nodes' addresses.
func redisCounts(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, " needed"); i >= 0 {
		return msg[:i+len(" needed")]
	}
	return "too few Redis nodes can vote"
}
