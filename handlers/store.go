package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"flashsale/inventory"
)

// orderRequest is the body of POST /api/orders.
type orderRequest struct {
	SKU  string `json:"sku"`
	Qty  int64  `json:"qty"`
	User string `json:"user"`
}

// seatRequest is the body of POST /api/events/{event}/seats/{seat}.
type seatRequest struct {
	User string `json:"user"`
}

func (s *Server) listProducts(c *gin.Context) error {
	ps, err := s.inv.Products(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, ps)
	return nil
}

// created answers 201 with what a sale made; a replay of an earlier request
// with the same Idempotency-Key says so in a header.
func created(c *gin.Context, v any, replay bool) {
	if replay {
		c.Header("Idempotent-Replay", "true")
	}
	c.JSON(http.StatusCreated, v)
}

func (s *Server) createOrder(c *gin.Context) error {
	variant, err := s.variant(c)
	if err != nil {
		return err
	}
	var req orderRequest
	if _, err := decode(c, &req, smallBody, false); err != nil {
		return err
	}
	c.Set(batchedKey, s.inv.Batched(variant))
	o, replay, err := s.inv.Buy(c.Request.Context(), inventory.Purchase{
		SKU: req.SKU, Qty: req.Qty, User: req.User, Lock: variant,
		IdempotencyKey: c.GetHeader("Idempotency-Key"),
	})
	if err != nil {
		return err
	}
	created(c, o, replay)
	return nil
}

func (s *Server) listOrders(c *gin.Context) error {
	os, err := s.inv.Orders(c.Request.Context(), c.Query("user"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, os)
	return nil
}

// seatMap answers an event's seat map: every seat taken or free, and who
// holds it only with the admin token. A shopper knows their own seats from
// their bookings; the room does not learn each other's names.
func (s *Server) seatMap(c *gin.Context) error {
	admin, err := s.checkAdmin(c)
	if err != nil {
		return err
	}
	m, err := s.inv.SeatMap(c.Request.Context(), c.Param("event"))
	if err != nil {
		return err
	}
	if !admin {
		for i := range m.Seats {
			m.Seats[i].User = ""
		}
	}
	c.JSON(http.StatusOK, m)
	return nil
}

func (s *Server) grabSeat(c *gin.Context) error {
	variant, err := s.variant(c)
	if err != nil {
		return err
	}
	var req seatRequest
	if _, err := decode(c, &req, smallBody, false); err != nil {
		return err
	}
	b, replay, err := s.inv.Grab(c.Request.Context(), inventory.SeatRequest{
		Event: c.Param("event"), Seat: c.Param("seat"), User: req.User, Lock: variant,
		IdempotencyKey: c.GetHeader("Idempotency-Key"),
	})
	if err != nil {
		return err
	}
	created(c, b, replay)
	return nil
}
