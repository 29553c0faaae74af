package handlers

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// index tells a person who opens the API root where to go.
func (s *Server) index(c *gin.Context) error {
	c.JSON(http.StatusOK, gin.H{
		"service": "flashsale",
		"lock":    s.defaultLock,
		"locks":   s.variants,
		"routes": []string{
			"GET /healthz", "GET /readyz", "GET /metrics",
			"GET /api/products", "POST /api/orders", "GET /api/orders?user=",
			"GET /api/events/{event}/seats", "POST /api/events/{event}/seats/{seat}",
			"GET /api/audit", "GET /api/stream",
			"POST /api/admin/reset", "PUT /api/admin/faults", "GET /api/admin/faults", "GET /api/admin/audit",
		},
	})
	return nil
}

func (s *Server) healthz(c *gin.Context) error {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
	return nil
}

// readyz is ready when the database answers and a Redis quorum does.
func (s *Server) readyz(c *gin.Context) error {
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
