package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"flashsale/lock"
)

// db-for-update: the lock is the database's own. The sale runs in one
// transaction that locks the row before reading it, and holds it while it
// checks, works and writes:
//
//	BEGIN
//	SELECT * FROM products WHERE sku = ? AND sale = ? FOR UPDATE  -- a second buyer waits here
//	… check the stock, do the business work …
//	UPDATE products SET stock = <read − qty> WHERE sku = ? AND sale = ?
//	INSERT INTO orders …
//	COMMIT
//
// The write is the same read-modify-write a lock rung makes, and it is safe
// because nobody else can read the row until this transaction ends. No Redis
// at all; the cost is that the row (on SQLite, the whole database) stays
// locked for the business work, so buyers of one SKU queue in the database.
//
// On PostgreSQL FOR UPDATE locks the one row. SQLite has no row locks (the
// driver drops FOR UPDATE): its lock is the database's single write lock,
// and a transaction holds it from its first write, not from its first read.
// inventory/db.go opens SQLite with _txlock=immediate, so BEGIN IMMEDIATE
// takes it at once; a DSN given with parameters of its own may not, so
// claimRow starts with a write that changes nothing, which takes the write
// lock before the read in any case. Either way every other writer, in this
// process or another, waits: a read-then-write cannot interleave.
//
// Like a lock rung's acquire, the wait for the row lock is bounded by the
// lock-wait budget (503 lock_busy past it): a connection from the pool,
// PostgreSQL's lock_timeout, SQLite's busy timeout. Unbounded, a slow
// critical section would queue buyers until their clients gave up.

// DBForUpdate is the design whose guard is the row's lock in the database.
const DBForUpdate = "db-for-update"

var forUpdateDesign = design{
	Design:  Design{Name: DBForUpdate, File: "inventory/for_update.go", Correct: true},
	section: func(s *Service) section { return rowLock{s} },
}

// rowLock is db-for-update's section: the sale in one transaction that
// holds the row's lock.
type rowLock struct{ s *Service }

// claimRow locks the row where the sale still owns it and reads it into
// dst. A row gone, or belonging to another sale, is a reset in flight.
func claimRow(tx *gorm.DB, dst any, table, where string, sale int64, id ...any) error {
	args := append(append([]any{}, id...), sale)
	where += " AND sale = ?"
	if tx.Dialector.Name() == "sqlite" {
		if err := tx.Exec("UPDATE "+table+" SET sale = sale WHERE "+where, args...).Error; err != nil {
			return fmt.Errorf("take the write lock: %w", err)
		}
	}
	err := tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Where(where, args...).Take(dst).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%w: %s %v", ErrSaleReset, table, id)
	}
	if err != nil {
		return fmt.Errorf("lock %s row: %w", table, err)
	}
	return nil
}

// rowLocked runs fn in a transaction whose waits for a lock end after the
// lock-wait budget, as ErrLockBusy. Once in, the transaction finishes
// whatever the shopper does (it is atomic either way).
func (s *Service) rowLocked(ctx context.Context, fn func(tx *gorm.DB) error) error {
	wctx, cancel := context.WithTimeout(ctx, s.lockWait)
	defer cancel()
	wait := s.lockWait.Milliseconds()
	err := storeUnavailable(s.db.WithContext(wctx).Connection(func(conn *gorm.DB) error {
		conn = conn.WithContext(context.WithoutCancel(ctx))
		if conn.Dialector.Name() == "sqlite" {
			var was int64
			if err := conn.Raw("PRAGMA busy_timeout").Scan(&was).Error; err != nil {
				return err
			}
			if err := conn.Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", wait)).Error; err != nil {
				return err
			}
			defer conn.Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", was))
		}
		return conn.Transaction(func(tx *gorm.DB) error {
			if tx.Dialector.Name() == "postgres" {
				if err := tx.Exec(fmt.Sprintf("SET LOCAL lock_timeout = %d", wait)).Error; err != nil {
					return err
				}
			}
			return fn(tx)
		})
	}))
	if errors.Is(err, ErrStoreUnavailable) {
		return err // no connection to wait on a row lock with: not busy, down
	}
	if lockTimedOut(err) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%w: row lock not obtained within %v: %w", ErrLockBusy, s.lockWait, err)
	}
	return err
}

// lockTimedOut reports whether err is the database giving up on a lock:
// PostgreSQL's lock_not_available, SQLite's busy.
func lockTimedOut(err error) bool {
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) && pg.SQLState() == "55P03" {
		return true
	}
	var lite sqlite3.Error
	return errors.As(err, &lite) && lite.Code == sqlite3.ErrBusy
}

// sell sells under the row lock. The Idempotency-Key was checked
// before; a twin that got in since fails the unique index at insert, and
// the caller resolves the gorm.ErrDuplicatedKey.
func (g rowLock) sell(ctx context.Context, p purchase, lease *lock.Lease) (order Order, replay bool, after int64, err error) {
	s := g.s
	err = s.rowLocked(ctx, func(tx *gorm.DB) error {
		var prod Product
		if err := claimRow(tx, &prod, "products", "sku = ?", p.sale, p.SKU); err != nil {
			return err
		}
		if err := soldOut(p.SKU, prod.Stock, p.Qty); err != nil {
			return err
		}
		// The business work runs with the row locked: that is this
		// design's price, paid by every buyer of the SKU queued behind it.
		if err := s.doWork(ctx, lease); err != nil {
			return err
		}
		order = newOrder(p.Purchase, p.hash, prod.PriceCents, 0, false)
		after = prod.Stock - p.Qty
		if err := tx.Exec("UPDATE products SET stock = ? WHERE sku = ? AND sale = ?", after, p.SKU, p.sale).Error; err != nil {
			return fmt.Errorf("write stock: %w", err)
		}
		return insert(tx, &order, "order")
	})
	return order, false, after, err
}

// book books a seat under the seat row's lock: the booking check and the
// insert cannot interleave with another grab of the seat.
func (g rowLock) book(ctx context.Context, r seatGrab, lease *lock.Lease) (booking Booking, replay bool, err error) {
	s := g.s
	err = s.rowLocked(ctx, func(tx *gorm.DB) error {
		var seat Seat
		if err := claimRow(tx, &seat, "seats", "event_id = ? AND label = ?", r.sale, r.Event, r.Seat); err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&Booking{}).Where("event_id = ? AND seat = ?", r.Event, r.Seat).Count(&n).Error; err != nil {
			return fmt.Errorf("read bookings: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("%w: %s %s", ErrSeatTaken, r.Event, r.Seat)
		}
		if err := s.doWork(ctx, lease); err != nil {
			return err
		}
		booking = newBooking(r, 0, false)
		if err := tx.Exec("UPDATE seats SET booked = ? WHERE event_id = ? AND label = ?", true, r.Event, r.Seat).Error; err != nil {
			return fmt.Errorf("mark seat: %w", err)
		}
		return insert(tx, &booking, "booking")
	})
	return booking, false, err
}
