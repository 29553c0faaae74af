package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"flashsale/lock"
)

// redis-stock: the flash-sale guides' design, with no lock. The stock of
// each SKU lives in Redis on the first node, seeded from the database at a
// reset (and at start-up, where missing). A sale first reserves its units
// there with one Lua script that checks and decrements in one step, so two
// buyers can never take the same unit; then it does its work and writes the
// order to the database, decrementing the database's stock in place. A
// database write that fails gives the units back (INCRBY). A seat is
// reserved the same way by SET NX on a key of its own, and given back by
// deleting the key only while it is still this request's.
//
// Redis is the guard, so Redis's state is the sale's state. A first node
// that restarts without its data has lost the stock: a missing key is not
// re-seeded from the database while the sale runs, because units reserved
// by requests still in flight are not in the database yet and the
// database's figure would sell them twice. Sales answer 503 until a reset
// seeds the keys again: unavailable, never oversold. A request that dies
// between its reservation and its write (or whose reply from Redis was
// lost) leaves Redis lower than the database: unsold units, never
// oversold ones. The audit compares the two (Audit.RedisStockDrift).

// ErrNotInRedis means the sale's stock is not in Redis: the first node lost
// it (restarted without its data). A reset seeds it again.
var ErrNotInRedis = errors.New("the sale's stock is not in Redis (the node lost its data?): reset the sale")

// reserveStock takes ARGV[1] units from the stock at KEYS[1] if it has
// them: the check and the decrement are one step. -1: no such key (not
// seeded, or lost); -2: not enough; else the stock left.
var reserveStock = redis.NewScript(`
local s = redis.call('GET', KEYS[1])
if not s then return -1 end
if tonumber(s) < tonumber(ARGV[1]) then return -2 end
return redis.call('DECRBY', KEYS[1], ARGV[1])`)

// giveBackStock returns ARGV[1] units to KEYS[1], unless the key is gone (a
// reset since): units of a finished sale must not appear in a new one.
var giveBackStock = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('INCRBY', KEYS[1], ARGV[1])`)

// reserveSeat sets the seat's key KEYS[2] to the request's owner value
// ARGV[1] if nobody has, and only while the sale's seats are in Redis
// (KEYS[1], the seeded mark). -1: not seeded or lost; 0: taken; 1: ours.
var reserveSeat = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('SET', KEYS[2], ARGV[1], 'NX') then return 1 end
return 0`)

// giveBackSeat deletes the seat's key only while it is this request's.
var giveBackSeat = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// storeKeys are the sale's keys in Redis; every one names the sale, so a
// request in flight across a reset never touches the new sale's keys.
type storeKeys struct{ ns string }

func (k storeKeys) prefix() string { return k.ns + "store:" }
func (k storeKeys) stock(sale int64, sku string) string {
	return k.prefix() + strconv.FormatInt(sale, 10) + ":stock:" + sku
}
func (k storeKeys) seat(sale int64, event, seat string) string {
	return k.prefix() + strconv.FormatInt(sale, 10) + ":seat:" + event + ":" + seat
}
func (k storeKeys) seatsSeeded(sale int64) string {
	return k.prefix() + strconv.FormatInt(sale, 10) + ":seats-seeded"
}

// redisStore is the node redis-stock keeps its stock on: the first.
func (s *Service) redisStore() *redis.Client { return s.nodes[0] }

// RedisStock is the design whose guard is the stock held in Redis.
const RedisStock = "redis-stock"

var redisStockDesign = design{
	Design:  Design{Name: RedisStock, File: "inventory/redis_stock.go", Correct: true},
	section: func(s *Service) section { return redisStock{s} },
}

// redisStock is redis-stock's section: reserve in Redis, then write.
type redisStock struct{ s *Service }

// redisStockRule is redis-stock's write: the reservation was the check.
var redisStockRule = writeRule{stock: writeInPlace}

// sell reserves the units in Redis, works, then writes the order; a
// failed write (a twin's order, a reset, a database error) gives the units
// back. A sold-out answer from Redis is final: Redis is the guard.
func (g redisStock) sell(ctx context.Context, p purchase, lease *lock.Lease) (order Order, replay bool, after int64, err error) {
	s := g.s
	key := s.keys.stock(p.sale, p.SKU)
	left, err := reserveStock.Run(ctx, s.redisStore(), []string{key}, p.Qty).Int64()
	switch {
	case err != nil:
		// A reply lost on the way may have reserved the units anyway: they
		// stay reserved (unsold, never oversold), and the audit shows it.
		return Order{}, false, 0, fmt.Errorf("%w: reserve %s in Redis: %w", ErrLockUnavailable, p.SKU, err)
	case left == -1:
		return Order{}, false, 0, fmt.Errorf("%w: %s: %w", ErrLockUnavailable, p.SKU, ErrNotInRedis)
	case left == -2:
		return Order{}, false, 0, fmt.Errorf("%w: %s (Redis has fewer than %d)", ErrSoldOut, p.SKU, p.Qty)
	}
	order, replay, after, err = s.orderReserved(ctx, p, lease)
	if err != nil || replay {
		s.giveBack(ctx, giveBackStock, key, p.Qty)
	}
	return order, replay, after, err
}

// orderReserved is the part after the reservation: the key check, the work
// and the write.
func (s *Service) orderReserved(ctx context.Context, p purchase, lease *lock.Lease) (Order, bool, int64, error) {
	rctx, cancel := storeStep(ctx)
	defer cancel()
	if o, found, err := s.orderByKey(rctx, s.db, p.User, p.IdempotencyKey, p.hash); err != nil || found {
		return o, found, 0, storeLate(rctx, err, "reading the order's key under its lease")
	}
	prod, err := s.product(rctx, s.db, p.SKU)
	if err != nil {
		return Order{}, false, 0, storeLate(rctx, err, "reading sku:"+p.SKU+" under its lease")
	}
	if err := s.doWork(ctx, lease); err != nil {
		return Order{}, false, 0, err
	}
	order := newOrder(p.Purchase, p.hash, prod.PriceCents, 0, false)
	after, err := s.commitOrder(ctx, p.sale, prod.Stock, 0, false, redisStockRule, &order)
	return order, false, after, err
}

// book reserves the seat in Redis, works, then books it; a failed
// booking gives the seat back.
func (g redisStock) book(ctx context.Context, r seatGrab, lease *lock.Lease) (booking Booking, replay bool, err error) {
	s := g.s
	key := s.keys.seat(r.sale, r.Event, r.Seat)
	got, err := reserveSeat.Run(ctx, s.redisStore(), []string{s.keys.seatsSeeded(r.sale), key}, lease.Owner()).Int64()
	switch {
	case err != nil:
		return Booking{}, false, fmt.Errorf("%w: reserve seat %s %s in Redis: %w", ErrLockUnavailable, r.Event, r.Seat, err)
	case got == -1:
		return Booking{}, false, fmt.Errorf("%w: seat %s %s: %w", ErrLockUnavailable, r.Event, r.Seat, ErrNotInRedis)
	case got == 0:
		return Booking{}, false, fmt.Errorf("%w: %s %s (reserved in Redis)", ErrSeatTaken, r.Event, r.Seat)
	}
	booking, replay, err = s.bookReserved(ctx, r, lease)
	if err != nil || replay {
		s.giveBack(ctx, giveBackSeat, key, lease.Owner())
	}
	return booking, replay, err
}

// bookReserved is the part after the seat's reservation.
func (s *Service) bookReserved(ctx context.Context, r seatGrab, lease *lock.Lease) (Booking, bool, error) {
	if b, found, err := s.bookingByKey(ctx, r.User, r.IdempotencyKey, r.hash); err != nil || found {
		return b, found, err
	}
	if err := s.doWork(ctx, lease); err != nil {
		return Booking{}, false, err
	}
	b := newBooking(r, 0, false)
	return b, false, s.commitBooking(ctx, &b, r.sale, 0, false, redisStockRule)
}

// giveBack runs a give-back script even when the shopper has gone; a
// give-back that fails leaves the units reserved (unsold), which the audit
// shows, so it is logged, not returned.
func (s *Service) giveBack(ctx context.Context, script *redis.Script, key string, arg any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := script.Run(ctx, s.redisStore(), []string{key}, arg).Err(); err != nil {
		s.log.Warn("redis-stock: give-back failed; the units stay reserved", "key", key, "err", err)
	}
}

// seedRedis copies the sale's stock and booked seats into Redis. A reset
// overwrites (the keys are new); start-up fills only what is missing, so an
// instance joining a running sale keeps the stock the others reserve from.
func (s *Service) seedRedis(ctx context.Context, overwrite bool) error {
	db := s.db.WithContext(ctx)
	var products []Product
	if err := db.Select("sku", "stock", "sale").Find(&products).Error; err != nil {
		return fmt.Errorf("read products: %w", err)
	}
	var seats []struct{ Sale int64 }
	if err := db.Model(&Seat{}).Distinct("sale").Find(&seats).Error; err != nil {
		return fmt.Errorf("read seats: %w", err)
	}
	var booked []struct {
		EventID, Seat string
		Sale          int64
	}
	err := db.Raw("SELECT b.event_id, b.seat, s.sale FROM bookings b JOIN seats s ON s.event_id = b.event_id AND s.label = b.seat").Scan(&booked).Error
	if err != nil {
		return fmt.Errorf("read bookings: %w", err)
	}
	set := func(p redis.Pipeliner, key string, v any) {
		if overwrite {
			p.Set(ctx, key, v, 0)
		} else {
			p.SetArgs(ctx, key, v, redis.SetArgs{Mode: "NX"}) // SET … NX: the ACL user has no SETNX
		}
	}
	// The seats' seeded mark goes last: a grab finds it only once every
	// booked seat's key is in place.
	_, err = s.redisStore().Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, pr := range products {
			set(p, s.keys.stock(pr.Sale, pr.SKU), pr.Stock)
		}
		for _, b := range booked {
			set(p, s.keys.seat(b.Sale, b.EventID, b.Seat), "booked")
		}
		for _, st := range seats {
			set(p, s.keys.seatsSeeded(st.Sale), 1)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed the sale in Redis: %w", err)
	}
	return nil
}

// clearRedis deletes every sale's keys from Redis, before a reset.
func (s *Service) clearRedis(ctx context.Context) error {
	rdb := s.redisStore()
	iter := rdb.Scan(ctx, 0, s.keys.prefix()+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

// redisStock reads Redis's stock of each product, by index; nil where the
// key is missing.
func (s *Service) redisStock(ctx context.Context, products []ProductAudit) ([]*int64, error) {
	cmds := make([]*redis.StringCmd, len(products))
	_, err := s.redisStore().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, pr := range products {
			cmds[i] = p.Get(ctx, s.keys.stock(pr.Sale, pr.SKU))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]*int64, len(products))
	for i, c := range cmds {
		if n, err := c.Int64(); err == nil {
			out[i] = &n
		}
	}
	return out, nil
}

// soldUnderRedis sums, per SKU, the units sold by redis-stock: what
// Redis's stock must be short of its initial value.
func soldUnderRedis(db *gorm.DB) (map[string]int64, error) {
	var rows []struct {
		SKU  string
		Sold int64
	}
	err := db.Raw(`SELECT sku, COALESCE(SUM(qty), 0) AS sold FROM orders WHERE "lock" = ? GROUP BY sku`, RedisStock).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.SKU] = r.Sold
	}
	return out, nil
}
