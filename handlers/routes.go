package handlers

import (
	"github.com/gin-gonic/gin"

	"flashsale/inventory"
	"flashsale/web"
)

// routes lists every route of the public contract (docs/api.md), plus
// the browser pages (web: / and /workshop), GET /api (an index of the API),
// GET /api/orders?user= (a user's orders, with the admin token: a shopper's
// page keeps its own) and GET /api/admin/faults (the plan in force). The two sale routes pass the
// per-client order rate limit first, then the instance's in-flight bound.
func (s *Server) routes() {
	e := s.engine
	e.NoRoute(s.handle(func(*gin.Context) error { return &Error{Code: "not_found"} }))
	e.NoMethod(s.handle(func(*gin.Context) error { return &Error{Code: "method_not_allowed"} }))

	pages := gin.WrapH(web.Handler(web.Options{LockSource: s.lockSource, StoreSource: inventory.Source, Logger: s.log}))
	for _, p := range web.Routes() {
		e.GET(p, pages)
		e.HEAD(p, pages)
	}
	e.GET("/healthz", s.handle(s.healthz))
	e.GET("/readyz", s.handle(s.readyz))
	e.GET("/metrics", s.metricsHandler)

	api := e.Group("/api")
	api.GET("", s.handle(s.index))
	api.GET("/products", s.handle(s.listProducts))
	api.POST("/orders", s.handle(s.limitOrders), s.handle(s.admitSales), s.handle(s.createOrder))
	api.GET("/orders", s.handle(s.requireAdmin), s.handle(s.listOrders))
	api.GET("/events/:event/seats", s.handle(s.seatMap))
	api.POST("/events/:event/seats/:seat", s.handle(s.limitOrders), s.handle(s.admitSales), s.handle(s.grabSeat))
	api.GET("/audit", s.handle(s.audit))
	api.GET("/stream", s.handle(s.stream))

	admin := api.Group("/admin", s.handle(s.requireAdmin))
	admin.POST("/reset", s.handle(s.reset))
	admin.PUT("/faults", s.handle(s.setFaults))
	admin.GET("/faults", s.handle(s.getFaults))
	admin.GET("/audit", s.handle(s.adminAudit))
	admin.POST("/workshop/runs", s.handle(s.startWorkshopRun))
	admin.GET("/workshop/runs", s.handle(s.listWorkshopRuns))
	admin.GET("/workshop/runs/:id", s.handle(s.getWorkshopRun))
	admin.GET("/workshop/runs/:id/stream", s.handle(s.streamWorkshopRun))
	admin.GET("/workshop/sequence", s.handle(s.getWorkshopSequence))
	admin.POST("/workshop/sequence", s.handle(s.startWorkshopSequence))
}
