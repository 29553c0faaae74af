package inventory_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"flashsale/internal/fault"
	"flashsale/internal/localredis"
	"flashsale/internal/locktap"
	"flashsale/internal/taptest"
	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// sale is one service over a real database and real Redis nodes.
type sale struct {
	svc     *inventory.Service
	lockers *lock.Client
	faults  *fault.Plan   // the plan the lockers' trace asks
	rdb     *redis.Client // the first node, where redis-stock keeps its stock
	ns      string        // the lockers' and the store's namespace
	db      *gorm.DB
}

// newSale is a sale over the store at dsn and the lockers opts (at most
// one) describe, in a namespace of its own unless opts names one.
func newSale(t testing.TB, dsn string, nodes *localredis.Cluster, cfg inventory.Config, opts ...lock.Options) sale {
	t.Helper()
	ctx := context.Background()
	var o lock.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Namespace == "" {
		o.Namespace = testsupport.Namespace()
	}
	o.Logger = testsupport.Logger()
	o, plan := taptest.Tap(o)
	lockers, err := lock.New(testsupport.Options(t, nodes), inventory.With(ladder.With(o)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lockers.Close() })
	db, err := inventory.Open(ctx, dsn, testsupport.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inventory.Close(db) })
	if cfg.Logger == nil {
		cfg.Logger = testsupport.Logger()
	}
	cfg.Nodes, cfg.Namespace = testsupport.Clients(t, nodes), o.Namespace
	svc, err := inventory.New(ctx, db, lockers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	voting(t, lockers)
	return sale{svc: svc, lockers: lockers, faults: plan, rdb: cfg.Nodes[0], ns: o.Namespace, db: db}
}

// voting waits until a quorum of nodes may vote: new nodes sit out their
// first TTL, since a node cannot tell a first start from a restart that lost
// its data.
func voting(t testing.TB, lockers *lock.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		err := lockers.Ping(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Redis nodes never ready to vote: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reset starts a clean sale of one SKU "hot" with the given stock and seats.
func (s sale) reset(t *testing.T, stock int64, seats int) {
	t.Helper()
	_, err := s.svc.Reset(context.Background(), inventory.Catalogue{
		Products: []inventory.ProductSpec{{SKU: "hot", Name: "Hot item", PriceCents: 100, Stock: stock}},
		Seats:    seats,
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (s sale) audit(t *testing.T) inventory.Audit {
	t.Helper()
	a, err := s.svc.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// buyers runs n concurrent single-unit orders and counts the outcomes.
func (s sale) buyers(t *testing.T, n int, variant string) (sold int, errs map[string]int) {
	t.Helper()
	return race(t, []sale{s}, n, variant, false)
}

// outcome names a refused sale or seat grab for counting.
func outcome(err error) string {
	switch {
	case errors.Is(err, inventory.ErrSoldOut):
		return "sold_out"
	case errors.Is(err, inventory.ErrSeatTaken):
		return "seat_taken"
	case errors.Is(err, inventory.ErrLockBusy):
		return "busy"
	case errors.Is(err, inventory.ErrStaleFence):
		return "stale"
	}
	return err.Error()
}

func TestCorrectLocksSellExactlyTheStock(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 3)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), nodes, inventory.Config{LockWait: 10 * time.Second})
			s.svc.SetWork(time.Millisecond)
			for _, v := range []string{lock.Lua, lock.Redlock, lock.LuaFence, lock.RedlockFence} {
				t.Run(v, func(t *testing.T) {
					s.reset(t, 20, 0)
					sold, errs := s.buyers(t, 60, v)
					// Exactly the stock is sold, and every other buyer is
					// told sold out, or busy (503s are allowed: a wait may
					// be told busy early when the line ahead looks longer
					// than its budget; one buyer was, once, in CI on a
					// loaded machine, -race and PostgreSQL).
					if sold != 20 || errs["sold_out"]+errs["busy"] != 40 {
						t.Fatalf("sold %d (want 20), other outcomes %v (want 40 sold_out or busy)", sold, errs)
					}
					if a := s.audit(t); !a.OK || a.SoldUnits != 20 || a.Orders != 20 {
						t.Fatalf("audit %+v", a)
					}
				})
			}
		})
	}
}

func TestNoLockOversells(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 1)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), nodes, inventory.Config{})
			s.svc.SetWork(20 * time.Millisecond)
			s.reset(t, 10, 0)
			sold, errs := s.buyers(t, 60, ladder.None)
			a := s.audit(t)
			t.Logf("none: sold %d of 10, outcomes %v, audit oversold=%d lost=%d", sold, errs, a.OversoldUnits, a.LostUpdates)
			if a.OK || a.OversoldUnits == 0 || a.LostUpdates == 0 {
				t.Fatalf("no lock and 20ms of work should oversell and lose updates; audit %+v", a)
			}
		})
	}
}

func TestProductionGuardsCatchWhatNoLockLetsThrough(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 1)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), nodes, inventory.Config{Production: true})
			s.svc.SetWork(20 * time.Millisecond)
			s.reset(t, 10, 4)
			sold, errs := s.buyers(t, 60, ladder.None)
			a := s.audit(t)
			if sold != 10 || a.OversoldUnits != 0 || a.LostUpdates != 0 {
				t.Fatalf("production guards: sold %d (want 10), outcomes %v, audit %+v", sold, errs, a)
			}
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					s.svc.Grab(context.Background(), inventory.SeatRequest{Event: "gala", Seat: "A1", User: fmt.Sprintf("u%d", i), Lock: ladder.None})
				})
			}
			wg.Wait()
			if a := s.audit(t); !a.OK || a.Bookings != 1 {
				t.Fatalf("production seat guard: audit %+v", a)
			}
			if s.svc.Stats().GuardRejections.Load() == 0 {
				t.Fatal("no guard rejection counted")
			}
		})
	}
}

// A holder paused inside its critical section past its TTL writes after the
// next holder has read: plain lua loses that update, the fenced variants
// refuse the stale write.
func TestPauseInCriticalSection(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 3)
	cases := []struct {
		variant   string
		wantStale bool
	}{
		{lock.Lua, false},
		{lock.Redlock, false},
		{lock.LuaFence, true},
		{lock.RedlockFence, true},
	}
	// paused hears of every holder the fault pauses in its critical section.
	paused := make(chan struct{}, 4)
	heard := func(e locktap.Event) {
		if e.Kind == locktap.FaultFired && e.Fault.Point == fault.InCriticalSection {
			paused <- struct{}{}
		}
	}
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{LockWait: 3 * time.Second},
		taptest.Observed(lock.Options{TTL: 150 * time.Millisecond, NodeTimeout: 50 * time.Millisecond}, heard))
	for _, c := range cases {
		t.Run(c.variant, func(t *testing.T) {
			s.reset(t, 10, 0)
			for len(paused) > 0 { // the previous case's second holder
				<-paused
			}
			if err := s.faults.Set(1, []fault.Fault{{Point: fault.InCriticalSection, Action: fault.Pause, P: 1, MS: 600}}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.faults.Set(0, nil) })
			staleBefore := s.svc.Stats().StaleFence.Load()
			first := make(chan error, 1)
			go func() {
				_, _, err := s.svc.Buy(context.Background(), inventory.Purchase{SKU: "hot", Qty: 1, User: "first", Lock: c.variant})
				first <- err
			}()
			<-paused // the first holder is paused in its critical section
			_, _, errSecond := s.svc.Buy(context.Background(), inventory.Purchase{SKU: "hot", Qty: 1, User: "second", Lock: c.variant})
			errFirst := <-first
			a := s.audit(t)
			if c.wantStale {
				if !errors.Is(errFirst, inventory.ErrStaleFence) || errSecond != nil {
					t.Fatalf("first: %v (want stale fence), second: %v (want success)", errFirst, errSecond)
				}
				if !a.OK || a.SoldUnits != 1 || s.svc.Stats().StaleFence.Load() == staleBefore {
					t.Fatalf("fenced audit %+v", a)
				}
				return
			}
			if errFirst != nil || errSecond != nil {
				t.Fatalf("first: %v, second: %v: both should believe they sold", errFirst, errSecond)
			}
			if a.OK || a.LostUpdates != 1 {
				t.Fatalf("unfenced: want one lost update, audit %+v", a)
			}
		})
	}
}

func TestCrashAfterSetNXLeavesAStuckLock(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{LockWait: 300 * time.Millisecond},
		lock.Options{TTL: 200 * time.Millisecond})
	for _, c := range []struct {
		variant string
		stuck   int
	}{{ladder.SetNXExpire, 1}, {lock.Lua, 0}} {
		t.Run(c.variant, func(t *testing.T) {
			s.reset(t, 10, 0)
			if err := s.faults.Set(7, []fault.Fault{{Point: fault.AfterAcquireStep1, Action: fault.Crash, P: 1}}); err != nil {
				t.Fatal(err)
			}
			_, _, err := s.svc.Buy(context.Background(), inventory.Purchase{SKU: "hot", Qty: 1, User: "u", Lock: c.variant})
			if !errors.Is(err, inventory.ErrHolderCrashed) {
				t.Fatalf("want holder crashed, got %v", err)
			}
			s.faults.Set(0, nil)
			time.Sleep(300 * time.Millisecond) // longer than the TTL
			_, _, err = s.svc.Buy(context.Background(), inventory.Purchase{SKU: "hot", Qty: 1, User: "v", Lock: c.variant})
			a := s.audit(t)
			if a.StuckLocks != c.stuck {
				t.Fatalf("stuck locks %d, want %d (audit %+v)", a.StuckLocks, c.stuck, a)
			}
			if c.stuck > 0 {
				if !errors.Is(err, inventory.ErrLockBusy) || a.OK {
					t.Fatalf("after the crash: %v (want busy for ever), audit ok=%v", err, a.OK)
				}
				// The audit's JSON names each stuck key and its node.
				b, err := json.Marshal(a)
				if err != nil {
					t.Fatal(err)
				}
				var got struct {
					Keys []map[string]string `json:"stuck_lock_keys"`
				}
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatal(err)
				}
				if len(got.Keys) != 1 || len(got.Keys[0]) != 2 || got.Keys[0]["node"] != nodes.Addrs()[0] || got.Keys[0]["key"] == "" {
					t.Fatalf("stuck_lock_keys %v, want one {node: %s, key: …}", got.Keys, nodes.Addrs()[0])
				}
				return
			}
			if err != nil || !a.OK {
				t.Fatalf("after the crash: %v, audit %+v", err, a)
			}
		})
	}
}

func TestIdempotencyKey(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 3)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), nodes, inventory.Config{LockWait: 5 * time.Second})
			s.reset(t, 100, 10)
			ctx := context.Background()
			p := inventory.Purchase{SKU: "hot", Qty: 2, User: "ann", Lock: lock.Redlock, IdempotencyKey: "k-1"}
			o1, replay1, err := s.svc.Buy(ctx, p)
			if err != nil || replay1 {
				t.Fatalf("first: %v replay=%v", err, replay1)
			}
			o2, replay2, err := s.svc.Buy(ctx, p)
			if err != nil || !replay2 || o2.ID != o1.ID {
				t.Fatalf("retry: order %d (want %d) replay=%v err=%v", o2.ID, o1.ID, replay2, err)
			}
			p.Qty = 3
			if _, _, err := s.svc.Buy(ctx, p); !errors.Is(err, inventory.ErrIdempotencyKeyReused) {
				t.Fatalf("different body, same key: %v", err)
			}
			// Concurrent twins, even with no lock at all, make one order.
			for _, v := range []string{lock.Redlock, ladder.None} {
				key := "twin-" + v
				var wg sync.WaitGroup
				ids := make([]uint64, 10)
				for i := range ids {
					wg.Go(func() {
						o, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "bob", Lock: v, IdempotencyKey: key})
						if err != nil {
							t.Errorf("%s twin %d: %v", v, i, err)
						}
						ids[i] = o.ID
					})
				}
				wg.Wait()
				for _, id := range ids {
					if id != ids[0] {
						t.Fatalf("%s: twins got different orders %v", v, ids)
					}
				}
			}
			b1, _, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: "gala", Seat: "A1", User: "ann", Lock: lock.Lua, IdempotencyKey: "s-1"})
			if err != nil {
				t.Fatal(err)
			}
			b2, replay, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: "gala", Seat: "A1", User: "ann", Lock: lock.Lua, IdempotencyKey: "s-1"})
			if err != nil || !replay || b2.ID != b1.ID {
				t.Fatalf("seat retry: %v replay=%v", err, replay)
			}
			a := s.audit(t)
			if !a.OK || a.Orders != 3 || a.SoldUnits != 4 || a.Bookings != 1 {
				t.Fatalf("audit %+v", a)
			}
		})
	}
}

func TestSeatGrab(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 3)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), nodes, inventory.Config{LockWait: 5 * time.Second})
			s.svc.SetWork(10 * time.Millisecond)
			for _, c := range []struct {
				variant    string
				wantDouble bool
			}{{ladder.None, true}, {lock.Redlock, false}, {lock.LuaFence, false}} {
				t.Run(c.variant, func(t *testing.T) {
					s.reset(t, 0, 5)
					var wg sync.WaitGroup
					for i := range 40 {
						wg.Go(func() {
							_, _, err := s.svc.Grab(context.Background(), inventory.SeatRequest{
								Event: "gala", Seat: fmt.Sprintf("A%d", i%5+1), User: fmt.Sprintf("u%d", i), Lock: c.variant})
							if err != nil && !errors.Is(err, inventory.ErrSeatTaken) {
								t.Errorf("grab: %v", err)
							}
						})
					}
					wg.Wait()
					a := s.audit(t)
					if c.wantDouble {
						if a.DoubleBookedSeats == 0 || a.OK {
							t.Fatalf("no lock should double-book; audit %+v", a)
						}
						return
					}
					if !a.OK || a.Bookings != 5 {
						t.Fatalf("audit %+v", a)
					}
					m, err := s.svc.SeatMap(context.Background(), "gala")
					if err != nil {
						t.Fatal(err)
					}
					for _, st := range m.Seats {
						if !st.Taken || st.Bookings != 1 {
							t.Fatalf("seat %+v", st)
						}
					}
				})
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{})
	s.reset(t, 5, 3)
	ctx := context.Background()
	buys := []struct {
		name string
		p    inventory.Purchase
		want error
	}{
		{"unknown sku", inventory.Purchase{SKU: "nope", Qty: 1, User: "u", Lock: lock.Lua}, inventory.ErrUnknownSKU},
		{"zero qty", inventory.Purchase{SKU: "hot", Qty: 0, User: "u", Lock: lock.Lua}, inventory.ErrInvalidQty},
		{"qty over cap", inventory.Purchase{SKU: "hot", Qty: inventory.MaxQty + 1, User: "u", Lock: lock.Lua}, inventory.ErrInvalidQty},
		{"empty user", inventory.Purchase{SKU: "hot", Qty: 1, User: "", Lock: lock.Lua}, inventory.ErrInvalidUser},
		{"unknown lock", inventory.Purchase{SKU: "hot", Qty: 1, User: "u", Lock: "mutex"}, lock.ErrUnknownVariant},
		{"more than stock", inventory.Purchase{SKU: "hot", Qty: 6, User: "u", Lock: lock.Lua}, inventory.ErrSoldOut},
		{"bad key", inventory.Purchase{SKU: "hot", Qty: 1, User: "u", Lock: lock.Lua, IdempotencyKey: "a b"}, inventory.ErrInvalidKey},
	}
	for _, c := range buys {
		if _, _, err := s.svc.Buy(ctx, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	grabs := []struct {
		name string
		r    inventory.SeatRequest
		want error
	}{
		{"unknown event", inventory.SeatRequest{Event: "opera", Seat: "A1", User: "u", Lock: lock.Lua}, inventory.ErrUnknownEvent},
		{"unknown seat", inventory.SeatRequest{Event: "gala", Seat: "Z9", User: "u", Lock: lock.Lua}, inventory.ErrUnknownSeat},
	}
	for _, c := range grabs {
		if _, _, err := s.svc.Grab(ctx, c.r); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, _, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: "gala", Seat: "A2", User: "u", Lock: lock.Lua}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: "gala", Seat: "A2", User: "v", Lock: lock.Lua}); !errors.Is(err, inventory.ErrSeatTaken) {
		t.Fatalf("second grab: %v", err)
	}
	for _, c := range []inventory.Catalogue{
		{Seats: -1}, {Seats: inventory.MaxSeats + 1},
		{Products: []inventory.ProductSpec{{SKU: "a b", Name: "x"}}},
		{Products: []inventory.ProductSpec{{SKU: "a", Name: "x"}, {SKU: "a", Name: "y"}}},
		{Products: []inventory.ProductSpec{{SKU: "a", Name: "x", Stock: -1}}},
	} {
		if _, err := s.svc.Reset(ctx, c); !errors.Is(err, inventory.ErrInvalidCatalogue) {
			t.Errorf("reset %+v: %v", c, err)
		}
	}
}

func TestAuditReportsAnUnreachableNode(t *testing.T) {
	nodes := testsupport.Redis(t, 3)
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{})
	s.reset(t, 5, 0)
	if err := nodes.Nodes[1].Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := s.audit(t)
	if a.OK || len(a.Errors) == 0 {
		t.Fatalf("audit with a node down: %+v", a)
	}
	if err := nodes.Nodes[1].Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// go-redis waits a moment before dialling a node that refused it again.
	a = s.audit(t)
	for deadline := time.Now().Add(10 * time.Second); !a.OK && time.Now().Before(deadline); a = s.audit(t) {
		time.Sleep(100 * time.Millisecond)
	}
	if !a.OK {
		t.Fatalf("audit with the node back: %+v", a)
	}
}

func TestDefaultCatalogueSeededOnce(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	dsn := testsupport.SQLite(t)
	s := newSale(t, dsn, nodes, inventory.Config{})
	newSale(t, dsn, nodes, inventory.Config{}) // a second instance on the same file
	ps, err := s.svc.Products(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := len(inventory.DefaultCatalogue().Products); len(ps) != want {
		t.Fatalf("%d products, want %d", len(ps), want)
	}
	m, err := s.svc.SeatMap(context.Background(), inventory.DefaultEvent)
	if err != nil || len(m.Seats) != 40 || m.Seats[0].Seat != "A1" || m.Seats[39].Seat != "D10" {
		t.Fatalf("seat map %v: %+v", err, m)
	}
}

// A holder paused across a reset must not write into the new sale, fenced or
// not: its write belongs to the old sale. (Before sales were told apart, a
// reset also restarted the fencing counters, so the new sale's first holder
// drew the very token the paused one carried, and the stale write passed.)
func TestResetFencesOffRequestsInFlight(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 1)
	for _, variant := range []string{lock.Lua, lock.LuaFence} {
		t.Run(variant, func(t *testing.T) {
			paused := make(chan struct{}, 1)
			s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{LockWait: 3 * time.Second},
				taptest.Observed(lock.Options{TTL: 200 * time.Millisecond}, func(e locktap.Event) {
					if e.Kind == locktap.FaultFired {
						select {
						case paused <- struct{}{}:
						default:
						}
					}
				}))
			ctx := context.Background()
			s.reset(t, 10, 0)
			if err := s.faults.Set(1, []fault.Fault{{Point: fault.InCriticalSection, Action: fault.Pause, P: 1, MS: 800}}); err != nil {
				t.Fatal(err)
			}
			first := make(chan error, 1)
			go func() {
				_, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "before-reset", Lock: variant})
				first <- err
			}()
			<-paused // the first holder has read the stock and is frozen
			if err := s.faults.Set(0, nil); err != nil {
				t.Fatal(err)
			}
			s.reset(t, 10, 0)
			if _, _, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "after-reset", Lock: variant}); err != nil {
				t.Fatalf("order in the new sale: %v", err)
			}
			if err := <-first; !errors.Is(err, inventory.ErrSaleReset) {
				t.Fatalf("the order paused across the reset: %v, want ErrSaleReset", err)
			}
			a := s.audit(t)
			if !a.OK || a.SoldUnits != 1 || a.Orders != 1 {
				t.Fatalf("new sale's audit %+v: want one order, one unit, nothing lost", a)
			}
		})
	}
}

// An Idempotency-Key is scoped to the user and the route: another user's
// same key makes an order of its own (no 422 telling that the key is in
// use), and the same key on the seat route is a booking's key.
func TestIdempotencyKeyScopedToUserAndRoute(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 3)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), nodes, inventory.Config{LockWait: 5 * time.Second})
			s.reset(t, 100, 4)
			ctx := context.Background()
			ann := inventory.Purchase{SKU: "hot", Qty: 2, User: "ann", Lock: lock.Lua, IdempotencyKey: "k"}
			bob := inventory.Purchase{SKU: "hot", Qty: 1, User: "bob", Lock: lock.Lua, IdempotencyKey: "k"}
			oa, _, err := s.svc.Buy(ctx, ann)
			if err != nil {
				t.Fatal(err)
			}
			ob, replay, err := s.svc.Buy(ctx, bob)
			if err != nil || replay || ob.ID == oa.ID {
				t.Fatalf("bob with ann's key: order %d (ann's %d) replay=%v err=%v", ob.ID, oa.ID, replay, err)
			}
			for _, c := range []struct {
				p  inventory.Purchase
				id uint64
			}{{ann, oa.ID}, {bob, ob.ID}} {
				o, replay, err := s.svc.Buy(ctx, c.p)
				if err != nil || !replay || o.ID != c.id {
					t.Fatalf("%s's retry: order %d (want %d) replay=%v err=%v", c.p.User, o.ID, c.id, replay, err)
				}
			}
			b, replay, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: "gala", Seat: "A1", User: "ann", Lock: lock.Lua, IdempotencyKey: "k"})
			if err != nil || replay {
				t.Fatalf("ann's key on the seat route: %v replay=%v", err, replay)
			}
			if _, _, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: "gala", Seat: "A2", User: "ann", Lock: lock.Lua, IdempotencyKey: "k"}); !errors.Is(err, inventory.ErrIdempotencyKeyReused) {
				t.Fatalf("ann's seat key for another seat: %v", err)
			}
			if _, replay, err := s.svc.Grab(ctx, inventory.SeatRequest{Event: "gala", Seat: "A2", User: "bob", Lock: lock.Lua, IdempotencyKey: "k"}); err != nil || replay {
				t.Fatalf("bob's seat with the same key: %v replay=%v", err, replay)
			}
			a := s.audit(t)
			if !a.OK || a.Orders != 2 || a.SoldUnits != 3 || a.Bookings != 2 || b.ID == 0 {
				t.Fatalf("audit %+v", a)
			}
		})
	}
}

// A database from before keys were scoped loses its global unique index on
// start-up, keeps its orders, and lets a second user use a key in use.
func TestMigrationScopesOldIdempotencyKeys(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 3)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			dsn := d.DSN(t)
			old := newSale(t, dsn, nodes, inventory.Config{})
			old.reset(t, 100, 2)
			// Make it the old schema: the key unique on its own.
			for _, q := range []string{
				"DROP INDEX IF EXISTS idx_orders_user_key", "DROP INDEX IF EXISTS idx_bookings_user_key",
				"CREATE UNIQUE INDEX idx_orders_idempotency_key ON orders (idempotency_key)",
				"CREATE UNIQUE INDEX idx_bookings_idempotency_key ON bookings (idempotency_key)",
			} {
				if err := old.db.Exec(q).Error; err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			ctx := context.Background()
			if _, _, err := old.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "ann", Lock: lock.Lua, IdempotencyKey: "k"}); err != nil {
				t.Fatal(err)
			}
			s := newSale(t, dsn, nodes, inventory.Config{}) // start-up migrates
			m := s.db.Migrator()
			for idx, want := range map[string]bool{"idx_orders_idempotency_key": false, "idx_orders_user_key": true} {
				if got := m.HasIndex(&inventory.Order{}, idx); got != want {
					t.Errorf("orders index %s exists: %v, want %v", idx, got, want)
				}
			}
			for idx, want := range map[string]bool{"idx_bookings_idempotency_key": false, "idx_bookings_user_key": true} {
				if got := m.HasIndex(&inventory.Booking{}, idx); got != want {
					t.Errorf("bookings index %s exists: %v, want %v", idx, got, want)
				}
			}
			o, replay, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "bob", Lock: lock.Lua, IdempotencyKey: "k"})
			if err != nil || replay {
				t.Fatalf("bob with ann's old key after the migration: %+v replay=%v err=%v", o, replay, err)
			}
			if _, replay, err := s.svc.Buy(ctx, inventory.Purchase{SKU: "hot", Qty: 1, User: "ann", Lock: lock.Lua, IdempotencyKey: "k"}); err != nil || !replay {
				t.Fatalf("ann's retry after the migration: replay=%v err=%v", replay, err)
			}
			if a := s.audit(t); a.Orders != 2 {
				t.Fatalf("audit %+v", a)
			}
		})
	}
}

// Buyers who keep coming back to a hot SKU faster than it can sell: once the
// line here is longer than a third of the wait budget, a newcomer is told
// busy at once (ErrLineTooLong) instead of waiting out the budget, and the
// sale stays exact.
func TestLongLineIsToldBusyAtOnce(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 3)
	s := newSale(t, testsupport.SQLite(t), nodes, inventory.Config{LockWait: 150 * time.Millisecond})
	s.svc.SetWork(5 * time.Millisecond)
	for _, v := range []string{lock.Lua, lock.Redlock} {
		t.Run(v, func(t *testing.T) {
			s.reset(t, 100_000, 0)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var sold, early, late atomic.Int64
			var wg sync.WaitGroup
			for i := range 24 {
				wg.Go(func() {
					for ctx.Err() == nil {
						_, _, err := s.svc.Buy(context.Background(), inventory.Purchase{SKU: "hot", Qty: 1, User: fmt.Sprintf("u%d", i), Lock: v})
						switch {
						case err == nil:
							sold.Add(1)
						case errors.Is(err, inventory.ErrLineTooLong):
							early.Add(1)
							time.Sleep(time.Millisecond) // a shopper clicks again
						case errors.Is(err, inventory.ErrLockBusy):
							late.Add(1)
						default:
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%s: %d sold, %d told busy at once, %d busy after the wait", v, sold.Load(), early.Load(), late.Load())
			if early.Load() == 0 {
				t.Errorf("nobody was told busy at once, though 24 buyers queued behind 5 ms sections with a 150 ms budget")
			}
			if a := s.audit(t); !a.OK || a.SoldUnits != sold.Load() {
				t.Errorf("audit %+v, want OK with %d sold", a, sold.Load())
			}
		})
	}
}
