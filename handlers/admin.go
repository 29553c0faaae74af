package handlers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"flashsale/internal/fault"
	"flashsale/inventory"
)

// maxWorkMS bounds the business work per sale an admin can set.
const maxWorkMS = 60_000

// MaxWork is the longest business work per sale an admin can set (PUT
// /api/admin/faults, work_ms): what a server's write timeout must leave a
// sale on top of its wait for the lock.
const MaxWork = maxWorkMS * time.Millisecond

// requireAdmin lets a request through only with the admin bearer token
// (checkAdmin, room.go).
func (s *Server) requireAdmin(c *gin.Context) error {
	ok, err := s.checkAdmin(c)
	if err != nil {
		return err
	}
	if !ok {
		return &Error{Code: "unauthorized"}
	}
	c.Next()
	return nil
}

// resetRequest is the body of POST /api/admin/reset. A field left out takes
// its default; an empty body is the default catalogue.
type resetRequest struct {
	Products *[]inventory.ProductSpec `json:"products"`
	Seats    *int                     `json:"seats"`
}

func (s *Server) reset(c *gin.Context) error {
	var req resetRequest
	if _, err := decode(c, &req, resetBody, true); err != nil {
		return err
	}
	cat := inventory.DefaultCatalogue()
	if req.Products != nil {
		cat.Products = *req.Products
	}
	if req.Seats != nil {
		cat.Seats = *req.Seats
	}
	st, err := s.inv.Reset(c.Request.Context(), cat)
	if err != nil {
		return err
	}
	s.log.Info("sale reset", "products", len(st.Products), "seats", st.Seats)
	c.JSON(http.StatusOK, st)
	return nil
}

// faultPlan is the body of PUT /api/admin/faults and the answer of both
// fault routes. Fired counts the faults fired so far, by point. Watchdog,
// when given, switches the lease watchdog for the leases granted from now
// on (the -watchdog flag is only where it starts); absent, it stays as it is.
// Fast switches the locks' speed layer the same way (-fast).
// Batch does the same for batching under one lease (-batch).
type faultPlan struct {
	Seed     uint64                 `json:"seed"`
	WorkMS   int                    `json:"work_ms"`
	Faults   []fault.Fault          `json:"faults"`
	Watchdog *bool                  `json:"watchdog,omitempty"`
	Fast     *bool                  `json:"fast,omitempty"`
	Batch    *bool                  `json:"batch,omitempty"`
	Fired    map[fault.Point]uint64 `json:"fired,omitempty"`
}

func (s *Server) setFaults(c *gin.Context) error {
	var req faultPlan
	if _, err := decode(c, &req, smallBody, false); err != nil {
		return err
	}
	if req.WorkMS < 0 || req.WorkMS > maxWorkMS {
		return errorf("invalid_fault", "work_ms must be between 0 and %d, got %d", maxWorkMS, req.WorkMS)
	}
	if req.Fired != nil {
		return errorf("unknown_field", "%q is reported, not set", "fired")
	}
	if err := s.faults.Set(req.Seed, req.Faults); err != nil {
		return &Error{Code: "invalid_fault", Detail: err.Error(), Err: err}
	}
	s.inv.SetWork(time.Duration(req.WorkMS) * time.Millisecond)
	if req.Watchdog != nil {
		s.lockers.SetWatchdog(*req.Watchdog)
		s.watchdog.Store(*req.Watchdog)
	}
	if req.Fast != nil {
		s.lockers.SetFast(*req.Fast)
		s.fast.Store(*req.Fast)
	}
	if req.Batch != nil {
		s.inv.SetBatch(*req.Batch)
	}
	s.log.Info("fault plan set", "seed", req.Seed, "work_ms", req.WorkMS, "faults", fmt.Sprint(req.Faults),
		"watchdog", s.watchdog.Load(), "fast", s.fast.Load(), "batch", s.inv.Batch())
	return s.getFaults(c)
}

func (s *Server) getFaults(c *gin.Context) error {
	seed, plan := s.faults.Plan()
	if plan == nil {
		plan = []fault.Fault{}
	}
	watchdog, fast, batch := s.watchdog.Load(), s.fast.Load(), s.inv.Batch()
	c.JSON(http.StatusOK, faultPlan{
		Seed: seed, WorkMS: int(s.inv.Work() / time.Millisecond), Faults: plan, Watchdog: &watchdog, Fast: &fast, Batch: &batch,
		Fired: s.faults.Fired(),
	})
	return nil
}
