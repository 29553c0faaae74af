// Package inventory is the storefront's domain: products, an event's seat
// map, orders and bookings in a SQL database through GORM, and the sale
// itself — read stock, do the business work, write stock and the order — run
// under a per-SKU (per-seat) lock from package lock. The audit checks the
// invariants a correct lock keeps.
//
// Workshop mode (the default) adds no database guard that would hide a lock
// failure; the fencing-token check is the one guard, and only for a fenced
// variant. Production mode adds a conditional update and a unique booking
// index as defence in depth.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"flashsale/lock"
	"flashsale/lock/ladder"
)

// Config configures a Service.
type Config struct {
	// Production turns on the database guards (conditional stock update,
	// unique seat booking) on top of the lock.
	Production bool
	// LockWait is how long a sale waits for a busy lock. Default 1s.
	LockWait time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Notify receives every committed change, for the live stream. It must
	// not block; nil drops them.
	Notify func(Change)
	// Batch serves the orders for one SKU that wait while its lock is busy
	// in one lease and one transaction (batch.go); SetBatch switches it at
	// run time.
	Batch bool
	// BatchMax is the most orders one lease serves. Default DefaultBatchMax.
	BatchMax int
	// Reads is where a sale's reads before its lock go (OpenReads); nil
	// means the database New is given.
	Reads *gorm.DB
	// Nodes are clients of the lockers' nodes, first node first: the audit
	// scans them for stuck locks, a reset clears their locks, and the
	// redis-stock design keeps its stock on the first. At least one.
	Nodes []*redis.Client
	// Namespace prefixes the store's Redis keys, as the lockers' options
	// prefix theirs. Default "flashsale:".
	Namespace string
}

// Change is a committed change of stock or seats, as the live stream sends it.
type Change struct {
	Type  string `json:"type"` // "stock", "seat" or "reset"
	SKU   string `json:"sku,omitempty"`
	Stock *int64 `json:"stock,omitempty"`
	Event string `json:"event,omitempty"`
	Seat  string `json:"seat,omitempty"`
	// User is who made the change. It is not sent to browsers either: the
	// stream is public, and a shopper's name is theirs.
	User string `json:"-"`
	// Owner is the owner value of the lease the change was written under,
	// so a history of writes can be tied to the lease that made each one.
	// It is not sent to browsers.
	Owner string `json:"-"`
}

// Stats are counters of what the sale refused or could not finish, for
// metrics. They only grow.
type Stats struct {
	// StaleFence counts writes refused because a newer fencing token had
	// been registered on the row.
	StaleFence atomic.Uint64
	// GuardRejections counts writes refused by a production-mode database
	// guard: each is a lock failure the database caught.
	GuardRejections atomic.Uint64
	// ReleaseErrors counts leases whose release failed after the work was
	// done (the order stands).
	ReleaseErrors atomic.Uint64
	// Crashes counts requests abandoned by an injected crash.
	Crashes atomic.Uint64
	// Batches counts the batches served under one lease each, and
	// BatchedOrders the orders in them.
	Batches, BatchedOrders atomic.Uint64
}

// Service runs the sale on one database and one set of locks.
type Service struct {
	db         *gorm.DB
	reads      *gorm.DB // the reads before the lock: never queued behind a holder's transaction
	lockers    *lock.Client
	designs    map[string]guard // the store designs' guards, by name
	production bool
	lockWait   time.Duration
	log        *slog.Logger
	notify     func(Change)
	work       atomic.Int64 // business work per sale, in nanoseconds
	stats      Stats
	nodes      []*redis.Client // the lockers' nodes; redis-stock keeps its stock on the first
	keys       storeKeys       // the store's keys there
	batch      atomic.Bool
	batchMax   int
	queues     batchQueues // the SKUs whose lock is busy here, with the orders waiting for it
	ahead      sharedReads // the batched orders' reads before the lock, shared by SKU
}

// New migrates the schema and returns the service. A database without any
// product or event gets the default catalogue, so a fresh start can sell.
func New(ctx context.Context, db *gorm.DB, lockers *lock.Client, cfg Config) (*Service, error) {
	if cfg.LockWait <= 0 {
		cfg.LockWait = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Notify == nil {
		cfg.Notify = func(Change) {}
	}
	if cfg.BatchMax <= 0 {
		cfg.BatchMax = DefaultBatchMax
	}
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("inventory: the lockers' nodes are required (Config.Nodes)")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "flashsale:"
	}
	if err := migrate(ctx, db, cfg.Production); err != nil {
		return nil, fmt.Errorf("inventory: migrate: %w", err)
	}
	s := &Service{db: db, lockers: lockers, production: cfg.Production, lockWait: cfg.LockWait, log: cfg.Logger, notify: cfg.Notify,
		nodes: cfg.Nodes, keys: storeKeys{ns: cfg.Namespace}, batchMax: cfg.BatchMax, queues: batchQueues{queues: map[string]*batchQueue{}}}
	if s.reads = cfg.Reads; s.reads == nil {
		s.reads = db
	}
	var err error
	if s.designs, err = s.designGuards(); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	s.batch.Store(cfg.Batch)
	if err := s.seed(ctx); err != nil {
		return nil, fmt.Errorf("inventory: seed: %w", err)
	}
	// Only redis-stock needs this; the other variants sell without it, so a
	// first node that is down now is a warning, not a failed (or slow) start.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.seedRedis(sctx, false); err != nil {
		s.log.Warn("redis-stock: the sale is not in Redis; redis-stock sales answer 503 until a reset", "err", err)
	}
	return s, nil
}

// seed inserts the default catalogue into an empty database. Rows that
// already exist are left alone, so instances starting together seed once.
func (s *Service) seed(ctx context.Context) error {
	var n int64
	if err := s.db.WithContext(ctx).Model(&Product{}).Count(&n).Error; err != nil {
		return err
	}
	var e int64
	if err := s.db.WithContext(ctx).Model(&Event{}).Count(&e).Error; err != nil {
		return err
	}
	if n > 0 || e > 0 {
		return nil
	}
	products, event, seats := rows(DefaultCatalogue())
	return s.transaction(ctx, func(tx *gorm.DB) error {
		ignore := func() *gorm.DB { return tx.Clauses(clause.OnConflict{DoNothing: true}) }
		if err := ignore().Create(&products).Error; err != nil {
			return err
		}
		if err := ignore().Create(&event).Error; err != nil {
			return err
		}
		if len(seats) > 0 {
			return ignore().CreateInBatches(&seats, 200).Error
		}
		return nil
	})
}

// rows turns a catalogue into the rows that hold it.
func rows(c Catalogue) ([]Product, Event, []Seat) {
	products := make([]Product, 0, len(c.Products))
	for _, p := range c.Products {
		products = append(products, Product{SKU: p.SKU, Name: p.Name, PriceCents: p.PriceCents, Stock: p.Stock, InitialStock: p.Stock})
	}
	return products, Event{ID: DefaultEvent, Name: "Gala night"}, seatLabels(DefaultEvent, c.Seats)
}

// Production reports whether the database guards are on.
func (s *Service) Production() bool { return s.production }

// Stats are the service's counters.
func (s *Service) Stats() *Stats { return &s.stats }

// SetWork sets the business work every sale does inside its critical
// section, between reading and writing stock: the window a broken lock lets
// two holders into.
func (s *Service) SetWork(d time.Duration) { s.work.Store(int64(max(d, 0))) }

// Work is the business work per sale.
func (s *Service) Work() time.Duration { return time.Duration(s.work.Load()) }

// Ping checks that the database answers; ErrStoreUnavailable when it
// cannot be reached.
func (s *Service) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return storeUnavailable(sqlDB.PingContext(ctx))
}

// Products lists the catalogue by SKU.
func (s *Service) Products(ctx context.Context) ([]Product, error) {
	ps := []Product{}
	if err := s.db.WithContext(ctx).Order("sku").Find(&ps).Error; err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	return ps, nil
}

// Orders lists a user's orders, newest first.
func (s *Service) Orders(ctx context.Context, user string) ([]Order, error) {
	if err := validUser(user); err != nil {
		return nil, err
	}
	os := []Order{}
	if err := s.db.WithContext(ctx).Where("user_name = ?", user).Order("id DESC").Limit(100).Find(&os).Error; err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	return os, nil
}

// State is the sale after a reset.
type State struct {
	Products []Product `json:"products"`
	Event    string    `json:"event"`
	Seats    int       `json:"seats"`
}

// Reset starts a clean sale: the lock keys (and redis-stock's) go first (a Redis node that does
// not answer stops the reset before the database is touched), then products,
// seats, orders and bookings are replaced in one transaction, as a new sale
// (Product.Sale). The fencing counters in Redis keep counting, so tokens
// grow across resets; the new rows' fences start at zero, below any token.
// redis-stock's stock and seats are seeded in Redis from the new rows.
// Rows that requests write to are deleted first: on PostgreSQL that waits
// for a write in flight to commit, and then deletes what it wrote too.
func (s *Service) Reset(ctx context.Context, c Catalogue) (State, error) {
	if err := c.Validate(); err != nil {
		return State{}, err
	}
	if err := ladder.Reset(ctx, s.nodes, s.keys.ns); err != nil {
		return State{}, fmt.Errorf("%w: reset lock keys: %w", ErrLockUnavailable, err)
	}
	if err := s.clearRedis(ctx); err != nil {
		return State{}, fmt.Errorf("%w: reset redis-stock keys: %w", ErrLockUnavailable, err)
	}
	products, event, seats := rows(c)
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		var last struct{ P, S int64 }
		if err := tx.Raw("SELECT (SELECT COALESCE(MAX(sale), 0) FROM products) AS p, (SELECT COALESCE(MAX(sale), 0) FROM seats) AS s").Scan(&last).Error; err != nil {
			return err
		}
		sale := max(last.P, last.S) + 1
		for i := range products {
			products[i].Sale = sale
		}
		for i := range seats {
			seats[i].Sale = sale
		}
		all := tx.Session(&gorm.Session{AllowGlobalUpdate: true})
		for _, m := range []any{&Product{}, &Seat{}, &Order{}, &Booking{}, &Event{}} {
			if err := all.Delete(m).Error; err != nil {
				return err
			}
		}
		if len(products) > 0 {
			if err := tx.Create(&products).Error; err != nil {
				return err
			}
		}
		if err := tx.Create(&event).Error; err != nil {
			return err
		}
		if len(seats) > 0 {
			return tx.CreateInBatches(&seats, 200).Error
		}
		return nil
	})
	if err != nil {
		return State{}, fmt.Errorf("reset database: %w", err)
	}
	if err := s.seedRedis(ctx, true); err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrLockUnavailable, err)
	}
	s.notify(Change{Type: "reset"})
	ps, err := s.Products(ctx)
	if err != nil {
		return State{}, err
	}
	return State{Products: ps, Event: event.ID, Seats: len(seats)}, nil
}

// validUser accepts 1 to MaxUserLen bytes of printable UTF-8.
func validUser(u string) error {
	switch {
	case u == "":
		return fmt.Errorf("%w: user is missing or empty", ErrInvalidUser)
	case len(u) > MaxUserLen:
		return fmt.Errorf("%w: user is longer than %d bytes", ErrInvalidUser, MaxUserLen)
	case !utf8.ValidString(u) || strings.IndexFunc(u, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("%w: user must be printable text", ErrInvalidUser)
	case strings.TrimSpace(u) == "":
		return fmt.Errorf("%w: user is blank", ErrInvalidUser)
	}
	return nil
}

// fencePtr records the token only for fenced variants.
func fencePtr(token uint64, fenced bool) *int64 {
	if !fenced {
		return nil
	}
	t := int64(token)
	return &t
}
