package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
)

// The batched orders of a SKU share the reads before the lock, yet no order
// is answered from a read older than itself: while other orders for the SKU
// keep its reads on their way the whole time, an order sent right after a
// restock (a reset to one unit) must see the unit and buy it. An order that
// joined a read already on its way would see the SKU sold out.
func TestSharedReadsNeverPredateTheOrder(t *testing.T) {
	testsupport.Long(t, "sales and faults that run for seconds")
	nodes := testsupport.Redis(t, 1)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), nodes, inventory.Config{LockWait: 5 * time.Second, Batch: true})
			s.reset(t, 0, 0)
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var shed atomic.Int64
			for i := range 8 {
				wg.Go(func() {
					// Two units, more than the stock ever holds: the read
					// sheds these orders, so they never buy the probe's unit.
					p := inventory.Purchase{SKU: "hot", Qty: 2, User: fmt.Sprintf("crowd%d", i), Lock: lock.Lua}
					for ctx.Err() == nil {
						if _, _, err := s.svc.Buy(ctx, p); outcome(err) == "sold_out" {
							shed.Add(1)
						}
					}
				})
			}
			defer func() { stop(); wg.Wait() }()
			waitFor(t, func() bool { return shed.Load() > 100 }, "the crowd's orders being shed")
			for i := range 30 {
				s.reset(t, 1, 0)
				p := inventory.Purchase{SKU: "hot", Qty: 1, User: fmt.Sprintf("probe%d", i), Lock: lock.Lua}
				if _, _, err := s.svc.Buy(context.Background(), p); err != nil {
					t.Fatalf("order %d, sent after the restock finished: %v (answered from an older read)", i, err)
				}
			}
			t.Logf("%d orders of the crowd shed beside the probes", shed.Load())
		})
	}
}
