package inventory_test

import (
	"context"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
)

// TestSaleSaysTheStockItLeft: a sale's answer carries the stock its
// transaction left in the row, one unit less each time, whatever guards the
// sale; a replay carries none (it made nothing).
func TestSaleSaysTheStockItLeft(t *testing.T) {
	nodes := testsupport.Redis(t, 3)
	for _, d := range testsupport.Databases() {
		t.Run(d.Name, func(t *testing.T) {
			s := newSale(t, d.DSN(t), nodes, inventory.Config{LockWait: 5 * time.Second})
			for _, v := range []string{lock.Lua, lock.RedlockFence, inventory.DBGuard, inventory.DBForUpdate, inventory.RedisStock} {
				t.Run(v, func(t *testing.T) {
					s.reset(t, 3, 0)
					ctx := context.Background()
					for want := int64(2); want >= 0; want-- {
						p := inventory.Purchase{SKU: "hot", Qty: 1, User: "ann", Lock: v, IdempotencyKey: "k" + string(rune('0'+want))}
						o, _, err := s.svc.Buy(ctx, p)
						if err != nil || o.StockLeft == nil || *o.StockLeft != want {
							t.Fatalf("sale with %d to be left: stock_left %v, err %v", want, o.StockLeft, err)
						}
						again, replay, err := s.svc.Buy(ctx, p)
						if err != nil || !replay || again.StockLeft != nil {
							t.Fatalf("replay: stock_left %v, replay %v, err %v", again.StockLeft, replay, err)
						}
					}
				})
			}
		})
	}
}
