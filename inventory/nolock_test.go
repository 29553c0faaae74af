package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
)

// twoProcesses is two services on one database and one set of Redis nodes,
// each with its own connection pool, as two app instances are: on SQLite a
// pool of one connection serialises a process's own requests, so only a
// second process can show that the guard holds across processes.
func twoProcesses(t *testing.T, dsn string, cfg inventory.Config) []sale {
	t.Helper()
	nodes := testsupport.Redis(t, 1)
	ns := lock.Options{Namespace: testsupport.Namespace()}
	return []sale{newSale(t, dsn, nodes, cfg, ns), newSale(t, dsn, nodes, cfg, ns)}
}

// race runs n single-unit buyers (or, with seats, grabs of seats A1…A5)
// spread over the processes ss, and counts the outcomes.
func race(t *testing.T, ss []sale, n int, variant string, seats bool) (ok int, errs map[string]int) {
	t.Helper()
	var mu sync.Mutex
	errs = map[string]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			svc, user := ss[i%len(ss)].svc, fmt.Sprintf("u%d", i)
			var err error
			if seats {
				_, _, err = svc.Grab(context.Background(), inventory.SeatRequest{Event: "gala", Seat: fmt.Sprintf("A%d", i%5+1), User: user, Lock: variant})
			} else {
				_, _, err = svc.Buy(context.Background(), inventory.Purchase{SKU: "hot", Qty: 1, User: user, Lock: variant})
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
				return
			}
			errs[outcome(err)]++
		})
	}
	wg.Wait()
	return ok, errs
}

// The rungs without a lock sell exactly the stock and book each seat once,
// with 20 ms of work in every sale (enough for none to oversell: see
// TestNoLockOversells) and buyers in two processes.
func TestStoreGuardsNeverOversell(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			ss := twoProcesses(t, d.DSN(t), inventory.Config{LockWait: 10 * time.Second})
			for _, p := range ss {
				p.svc.SetWork(20 * time.Millisecond)
			}
			for _, v := range []string{inventory.DBGuard, inventory.DBForUpdate, inventory.RedisStock} {
				t.Run(v, func(t *testing.T) {
					ss[0].reset(t, 10, 5)
					sold, errs := race(t, ss, 40, v, false)
					if sold != 10 || errs["sold_out"] != 30 {
						t.Fatalf("sold %d (want 10), other outcomes %v (want 30 sold out)", sold, errs)
					}
					booked, errs := race(t, ss, 30, v, true)
					if booked != 5 || errs["seat_taken"] != 25 {
						t.Fatalf("booked %d (want 5), other outcomes %v (want 25 taken)", booked, errs)
					}
					a := ss[1].audit(t)
					if !a.OK || a.SoldUnits != 10 || a.Bookings != 5 || a.RedisStockDrift != 0 {
						t.Fatalf("audit %+v", a)
					}
				})
			}
		})
	}
}

// refuseInserts makes the database refuse every insert into table, as a
// failing database would, until the returned function lifts it.
func refuseInserts(t *testing.T, s sale, table string) func() {
	t.Helper()
	trigger := "refuse_" + table
	stmts := []string{fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON %s BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`, trigger, table)}
	if s.db.Dialector.Name() == "postgres" {
		stmts = []string{
			`CREATE OR REPLACE FUNCTION refuse_insert() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql`,
			fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION refuse_insert()`, trigger, table),
		}
	}
	for _, q := range stmts {
		if err := s.db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	drop := "DROP TRIGGER " + trigger
	if s.db.Dialector.Name() == "postgres" {
		drop += " ON " + table
	}
	return func() {
		if err := s.db.Exec(drop).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// A reservation whose database write fails is given back: Redis's stock
// (and a seat's key) is as if the request never came.
func TestRedisStockGivesBackOnFailedWrite(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), testsupport.Redis(t, 1), inventory.Config{})
			s.reset(t, 5, 1)
			ctx := context.Background()
			buy := func(user string) error {
				_, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 2, User: user, Lock: inventory.RedisStock})
				return err
			}
			grab := func(user string) error {
				_, _, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: "gala", Seat: "A1", User: user, Lock: inventory.RedisStock})
				return err
			}
			if err := buy("first"); err != nil {
				t.Fatal(err)
			}
			lift := refuseInserts(t, s, "orders")
			if err := buy("second"); err == nil || !strings.Contains(err.Error(), "refused by the test") {
				t.Fatalf("buy with a failing database: %v", err)
			}
			lift()
			a := s.audit(t)
			if p := a.Products[0]; p.RedisStock == nil || *p.RedisStock != 3 || p.RedisDrift != 0 || p.Stock != 3 {
				t.Fatalf("after a failed write Redis should hold 3 like the database; audit %+v", p)
			}
			lift = refuseInserts(t, s, "bookings")
			if err := grab("second"); err == nil || errors.Is(err, inventory.ErrSeatTaken) {
				t.Fatalf("grab with a failing database: %v", err)
			}
			lift()
			if err := grab("third"); err != nil {
				t.Fatalf("the seat was not given back: %v", err)
			}
		})
	}
}

// stockKey is redis-stock's key of the SKU hot, found on the first node.
func stockKey(t *testing.T, s sale) string {
	t.Helper()
	keys, err := s.rdb.Keys(context.Background(), s.ns+"store:*:stock:hot").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("stock key: %v %v", keys, err)
	}
	return keys[0]
}

// The audit reconciles Redis's stock with the database: units taken from
// Redis and never written show as drift; a lost key stops redis-stock's
// sales (503) until a reset seeds it again.
func TestAuditReportsRedisDrift(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), testsupport.Redis(t, 1), inventory.Config{})
			s.reset(t, 10, 0)
			ctx := context.Background()
			buy := func() error {
				_, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "u", Lock: inventory.RedisStock})
				return err
			}
			for range 3 {
				if err := buy(); err != nil {
					t.Fatal(err)
				}
			}
			if a := s.audit(t); a.RedisStockDrift != 0 || *a.Products[0].RedisStock != 7 {
				t.Fatalf("clean sale: audit %+v", a)
			}
			rdb, key := s.rdb, stockKey(t, s)
			if err := rdb.DecrBy(ctx, key, 2).Err(); err != nil {
				t.Fatal(err)
			}
			a := s.audit(t)
			if p := a.Products[0]; a.RedisStockDrift != 2 || p.RedisDrift != -2 || !a.OK {
				t.Fatalf("2 units gone from Redis only: audit %+v, product %+v", a, p)
			}
			if err := rdb.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if err := buy(); !errors.Is(err, inventory.ErrLockUnavailable) || !errors.Is(err, inventory.ErrNotInRedis) {
				t.Fatalf("buy with the stock lost from Redis: %v", err)
			}
			if a := s.audit(t); a.Products[0].RedisStock != nil {
				t.Fatalf("lost key: audit %+v", a.Products[0])
			}
			s.reset(t, 10, 0)
			if err := buy(); err != nil {
				t.Fatalf("after a reset: %v", err)
			}
		})
	}
}
