package inventory_test

import (
	"context"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// Another instance holds SQLite's write lock and does not let go (paused,
// or starved of the CPU). A holder's store step waits for it only its own
// time, not SQLite's 10 s busy timeout, which no context interrupts: the
// fencing token's registration, an order's write (none: every sale a
// holder at once) and a seat's answer store unavailable within a few
// seconds. With the lock let go, the next sale goes through and the audit
// holds.
func TestWriteLockHeldElsewhereIsUnavailableInTime(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 1)
	dsn := testsupport.SQLite(t)
	s := newSale(t, dsn, nodes, inventory.Config{})
	s.reset(t, 10, 4)
	ctx := context.Background()
	other, err := inventory.Open(ctx, dsn, testsupport.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inventory.Close(other) })
	held := other.Begin() // BEGIN IMMEDIATE: the write lock, until Rollback
	if err := held.Exec("UPDATE products SET name = name").Error; err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		sell func() error
	}{
		{"none order", func() error {
			_, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "ann", Lock: ladder.None})
			return err
		}},
		{"lua+fence order", func() error {
			_, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "bob", Lock: lock.LuaFence})
			return err
		}},
		{"lua seat", func() error {
			_, _, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: inventory.DefaultEvent, Seat: "A1", User: "cid", Lock: lock.Lua})
			return err
		}},
	}
	for _, c := range cases {
		began := time.Now()
		err := c.sell()
		took := time.Since(began)
		if err := notStoreDown(err); err != nil {
			t.Errorf("%s with the write lock held elsewhere: %v", c.name, err)
		}
		// SQLite's own busy timeout is 10 s; the store step's is 2 s.
		if took > 6*time.Second {
			t.Errorf("%s answered after %v: the wait for the write lock was not bounded", c.name, took)
		}
	}
	if err := held.Rollback().Error; err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "dan", Lock: lock.Lua}); err != nil {
		t.Fatalf("with the write lock let go: %v", err)
	}
	if a := s.audit(t); !a.OK {
		t.Fatalf("audit: %+v", a)
	}
}
