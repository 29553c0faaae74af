package inventory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
	"flashsale/internal/taptest"
	"flashsale/internal/testsupport"
	"flashsale/inventory"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// A batch whose write meets a twin's Idempotency-Key, committed in another
// process since the keys were read, writes the rest again: that is a second
// write, and lua+check checks its lease again before it. Here the lease
// goes to another holder between the batch's check and its first write (as
// a pause there would let it), and the twin makes that write fail: the
// second write must find the lease gone and write nothing.
func TestBatchRetryAfterATwinChecksTheLeaseAgain(t *testing.T) {
	nodes := testsupport.Redis(t, 1)
	dsn := testsupport.SQLite(t)
	ns := testsupport.Namespace()
	raw := redis.NewClient(testsupport.Options(t, nodes)[0])
	t.Cleanup(func() { _ = raw.Close() })
	twin := inventory.Purchase{SKU: "hot", Qty: 1, User: "ann", Lock: ladder.None, IdempotencyKey: "a-1"}
	var other sale // the process whose twin commits meanwhile
	var once sync.Once
	var meanwhile error
	first := newSale(t, dsn, nodes, inventory.Config{LockWait: 10 * time.Second, Batch: true},
		taptest.Observed(lock.Options{Namespace: ns, TTL: 2 * time.Second}, func(e locktap.Event) {
			if e.Kind != locktap.FaultFired || e.Fault.Point != fault.AfterLeaseCheck {
				return
			}
			// The batch has checked its lease and not yet written: the
			// twin commits, and the lock changes hands.
			once.Do(func() {
				ctx := context.Background()
				if _, _, err := other.svc.Buy(ctx, twin); err != nil {
					meanwhile = err
					return
				}
				meanwhile = raw.Set(ctx, ns+"lock:sku:hot", "a successor", 10*time.Second).Err()
			})
		}))
	other = newSale(t, dsn, nodes, inventory.Config{LockWait: 10 * time.Second}, lock.Options{Namespace: ns})
	first.reset(t, 10, 0)
	if err := first.faults.Set(1, []fault.Fault{{Point: fault.AfterLeaseCheck, Action: fault.Pause, P: 1, MS: 1}}); err != nil {
		t.Fatal(err)
	}
	v := ladder.LuaCheck
	ann := twin
	ann.Lock = v
	r := queued(t, first, v, []inventory.Purchase{ann, {SKU: "hot", Qty: 1, User: "bob", Lock: v}})
	if meanwhile != nil {
		t.Fatalf("the twin's order and the successor's lock: %v", meanwhile)
	}
	if !errors.Is(r[1].err, inventory.ErrLeaseLost) {
		t.Errorf("bob's order, written again after the twin, under a lease gone since the check: %+v, want lease lost", r[1])
	}
	if a := first.audit(t); a.Orders != 1 {
		t.Fatalf("audit %+v: want only the twin's order", a)
	}
}
