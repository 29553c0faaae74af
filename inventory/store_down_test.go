package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
	"flashsale/internal/taptest"
	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
)

// notStoreDown fails t unless err is ErrStoreUnavailable and nothing that
// would send the shopper elsewhere (a busy lock, Redis down, bad input).
func notStoreDown(err error) error {
	switch {
	case !errors.Is(err, inventory.ErrStoreUnavailable):
		return fmt.Errorf("%v, want ErrStoreUnavailable", err)
	case errors.Is(err, inventory.ErrLockBusy), errors.Is(err, inventory.ErrLockUnavailable), errors.Is(err, inventory.ErrSoldOut):
		return fmt.Errorf("%v: also a lock or stock answer", err)
	}
	return nil
}

// The database goes away while a holder is inside its critical section
// (the link to PostgreSQL is cut from the fault point, between the read and
// the write): every rung's write, a batch's and a seat's answer
// ErrStoreUnavailable, never an error that reads as a bug. With the link
// back, the next sale goes through and the audit holds.
func TestStoreGoneMidSaleIsUnavailable(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 1)
	dsn, link := testsupport.ProxiedPostgres(t)
	cut := func(e locktap.Event) {
		if e.Kind == locktap.FaultFired && e.Fault.Point == fault.InCriticalSection {
			link.Cut()
		}
	}
	s := newSale(t, dsn, nodes, inventory.Config{LockWait: 2 * time.Second}, taptest.Observed(lock.Options{}, cut))
	ctx := context.Background()
	cases := []struct {
		name    string
		variant string
		batch   bool
		seat    bool
	}{
		{name: "lua", variant: lock.Lua},
		{name: "lua+fence", variant: lock.LuaFence},
		{name: "redlock", variant: lock.Redlock},
		{name: "lua batched", variant: lock.Lua, batch: true},
		{name: "db-guard", variant: inventory.DBGuard},
		{name: "db-for-update", variant: inventory.DBForUpdate},
		{name: "redis-stock", variant: inventory.RedisStock},
		{name: "lua seat", variant: lock.Lua, seat: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.reset(t, 10, 4)
			s.svc.SetBatch(c.batch)
			t.Cleanup(func() { s.svc.SetBatch(false) })
			sell := func(user string) error {
				if c.seat {
					_, _, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: inventory.DefaultEvent, Seat: "A1", User: user, Lock: c.variant})
					return err
				}
				_, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: user, Lock: c.variant})
				return err
			}
			if err := s.faults.Set(1, []fault.Fault{{Point: fault.InCriticalSection, Action: fault.Pause, P: 1, MS: 1}}); err != nil {
				t.Fatal(err)
			}
			err := sell("ann")
			if err := s.faults.Set(0, nil); err != nil {
				t.Fatal(err)
			}
			if err := notStoreDown(err); err != nil {
				t.Errorf("the database cut mid-sale: %v", err)
			}
			link.Mend(t)
			// Connections the cut broke may still sit in the pool: each
			// answers unavailable once and is dropped. Nothing else may.
			var resumed bool
			for range 20 {
				err := sell("bob")
				if err == nil {
					resumed = true
					break
				}
				if err := notStoreDown(err); err != nil {
					t.Fatalf("with the database back: %v", err)
				}
			}
			if !resumed {
				t.Fatal("with the database back, 20 tries in a row answered unavailable")
			}
			if a := s.audit(t); !a.OK {
				t.Fatalf("audit after the cut: %+v", a)
			}
		})
	}
}

// With the database unreachable before anything starts, the reads, the
// checks before the lock, a reset and the readiness ping all answer
// ErrStoreUnavailable.
func TestStoreGoneAnswersUnavailable(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	dsn, link := testsupport.ProxiedPostgres(t)
	s := newSale(t, dsn, nodes, inventory.Config{})
	s.reset(t, 10, 4)
	link.Cut()
	ctx := context.Background()
	calls := []struct {
		name string
		call func() error
	}{
		{"ping", func() error { return s.svc.Ping(ctx) }},
		{"products", func() error { _, err := s.svc.Products(ctx); return err }},
		{"orders", func() error { _, err := s.svc.Orders(ctx, "ann"); return err }},
		{"seat map", func() error { _, err := s.svc.SeatMap(ctx, inventory.DefaultEvent); return err }},
		{"audit", func() error { _, err := s.svc.Audit(ctx); return err }},
		{"buy", func() error {
			_, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "ann", Lock: lock.Lua})
			return err
		}},
		{"grab", func() error {
			_, _, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: inventory.DefaultEvent, Seat: "A1", User: "ann", Lock: lock.Lua})
			return err
		}},
		{"reset", func() error {
			_, err := s.svc.Reset(ctx, inventory.Catalogue{Products: []inventory.ProductSpec{{SKU: "hot", Name: "Hot", PriceCents: 1, Stock: 1}}})
			return err
		}},
	}
	for _, c := range calls {
		if err := notStoreDown(c.call()); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// A SQLite pool closed under the service (a shutdown with requests still
// in flight) is unavailable too, not an internal error.
func TestClosedSQLiteIsUnavailable(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{})
	s.reset(t, 10, 0)
	if err := inventory.Close(s.db); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.svc.Buy(context.Background(), inventory.Purchase{SKU: "hot", Qty: 1, User: "ann", Lock: lock.Lua})
	if err := notStoreDown(err); err != nil {
		t.Errorf("buy: %v", err)
	}
	if err := notStoreDown(s.svc.Ping(context.Background())); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// Bad input and a sold-out SKU are never mistaken for a store that is down.
func TestStoreUpIsNotUnavailable(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{})
	s.reset(t, 1, 0)
	ctx := context.Background()
	for _, p := range []inventory.Purchase{
		{SKU: "nope", Qty: 1, User: "ann", Lock: lock.Lua},
		{SKU: "hot", Qty: 2, User: "ann", Lock: lock.Lua},
		{SKU: "hot", Qty: 1, User: "", Lock: lock.Lua},
	} {
		if _, _, err := s.svc.Buy(ctx, p); err == nil || errors.Is(err, inventory.ErrStoreUnavailable) {
			t.Errorf("%+v: %v, want a refusal that is not ErrStoreUnavailable", p, err)
		}
	}
}
