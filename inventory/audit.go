package inventory

import (
	"context"
	"flashsale/lock/ladder"
	"fmt"
)

// ProductAudit is the audit of one SKU.
type ProductAudit struct {
	SKU          string `json:"sku"`
	InitialStock int64  `json:"initial_stock"`
	Stock        int64  `json:"stock"`
	SoldUnits    int64  `json:"sold_units"`
	Orders       int64  `json:"orders"`
	// OversoldUnits is max(0, sold − initial).
	OversoldUnits int64 `json:"oversold_units"`
	// LostUpdates is |(initial − sold) − stock|: units whose decrement some
	// other holder's write overwrote.
	LostUpdates int64 `json:"lost_updates"`
	// RedisStock is the SKU's stock in Redis (redis-stock's guard), null
	// when Redis has none for this sale.
	RedisStock *int64 `json:"redis_stock"`
	// RedisDrift is RedisStock − (initial − units sold under redis-stock):
	// 0 when Redis and the database agree; below 0, units reserved in
	// Redis that no order holds (a request lost between reservation and
	// write: unsold, never oversold); above 0, units Redis would sell that
	// the database has already sold.
	RedisDrift int64 `json:"redis_drift"`
	Sale       int64 `json:"-"`
}

// Audit is the check of the sale's invariants. OK is true only when every
// figure is clean and every Redis node answered.
type Audit struct {
	OK                bool  `json:"ok"`
	SoldUnits         int64 `json:"sold_units"`
	Orders            int64 `json:"orders"`
	OversoldUnits     int64 `json:"oversold_units"`
	LostUpdates       int64 `json:"lost_updates"`
	DoubleBookedSeats int64 `json:"double_booked_seats"`
	StuckLocks        int   `json:"stuck_locks"`
	// RedisStockDrift is Σ |redis_drift| over the products: redis-stock's
	// reconciliation of Redis with the database. It does not make the
	// audit fail (a unit reserved and never written is unsold, not
	// oversold; an oversell shows in oversold_units), it says they differ.
	RedisStockDrift int64          `json:"redis_stock_drift"`
	Bookings        int64          `json:"bookings"`
	Products        []ProductAudit `json:"products"`
	// StuckLockKeys names the lock keys without a TTL, by node.
	StuckLockKeys []ladder.StuckLock `json:"stuck_lock_keys,omitempty"`
	// Errors says which checks could not be made (a Redis node down).
	Errors []string `json:"errors,omitempty"`
}

// Audit checks, from the database and the Redis nodes: sold ≤ initial and
// stock = initial − sold per SKU, at most one booking per seat, and no lock
// key without a TTL. A node that does not answer makes the audit not OK but
// the other figures are still reported.
func (s *Service) Audit(ctx context.Context) (Audit, error) {
	db := s.db.WithContext(ctx)
	a := Audit{Products: []ProductAudit{}}
	err := db.Raw(`SELECT p.sku AS sku, p.initial_stock AS initial_stock, p.stock AS stock, p.sale AS sale,
		COALESCE(SUM(o.qty), 0) AS sold_units, COUNT(o.id) AS orders
		FROM products p LEFT JOIN orders o ON o.sku = p.sku
		GROUP BY p.sku, p.initial_stock, p.stock, p.sale ORDER BY p.sku`).Scan(&a.Products).Error
	if err != nil {
		return Audit{}, fmt.Errorf("audit products: %w", err)
	}
	for i := range a.Products {
		p := &a.Products[i]
		p.OversoldUnits = max(0, p.SoldUnits-p.InitialStock)
		p.LostUpdates = abs(p.InitialStock - p.SoldUnits - p.Stock)
		a.SoldUnits += p.SoldUnits
		a.OversoldUnits += p.OversoldUnits
		a.LostUpdates += p.LostUpdates
	}
	if err := s.reconcileRedis(ctx, &a); err != nil {
		a.Errors = append(a.Errors, "redis-stock reconciliation incomplete: "+err.Error())
	}
	if err := db.Model(&Order{}).Count(&a.Orders).Error; err != nil {
		return Audit{}, fmt.Errorf("audit orders: %w", err)
	}
	if err := db.Model(&Booking{}).Count(&a.Bookings).Error; err != nil {
		return Audit{}, fmt.Errorf("audit bookings: %w", err)
	}
	err = db.Raw(`SELECT COUNT(*) FROM (SELECT event_id, seat FROM bookings
		GROUP BY event_id, seat HAVING COUNT(*) > 1) AS twice`).Scan(&a.DoubleBookedSeats).Error
	if err != nil {
		return Audit{}, fmt.Errorf("audit bookings: %w", err)
	}
	a.StuckLockKeys, err = ladder.StuckLocks(ctx, s.nodes, s.keys.ns)
	a.StuckLocks = len(a.StuckLockKeys)
	if err != nil {
		a.Errors = append(a.Errors, "stuck-lock scan incomplete: "+err.Error())
	}
	a.OK = a.OversoldUnits == 0 && a.LostUpdates == 0 && a.DoubleBookedSeats == 0 &&
		a.StuckLocks == 0 && len(a.Errors) == 0
	return a, nil
}

// reconcileRedis fills in Redis's stock of each product and how far it is
// from what the orders sold under redis-stock leave.
func (s *Service) reconcileRedis(ctx context.Context, a *Audit) error {
	sold, err := soldUnderRedis(s.db.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("read orders: %w", err)
	}
	inRedis, err := s.redisStock(ctx, a.Products)
	if err != nil {
		return err
	}
	for i := range a.Products {
		p := &a.Products[i]
		if p.RedisStock = inRedis[i]; p.RedisStock == nil {
			continue
		}
		p.RedisDrift = *p.RedisStock - (p.InitialStock - sold[p.SKU])
		a.RedisStockDrift += abs(p.RedisDrift)
	}
	return nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
