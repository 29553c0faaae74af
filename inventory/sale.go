package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"flashsale/internal/clock"
	"flashsale/internal/fault"
	"flashsale/lock"
)

// admitShare: a request joins the line for a lock only while the waiters
// ahead of it are expected to take at most 1/admitShare of its wait budget.
// A third keeps the key busy (the line then still holds a third of a
// budget's worth of sales) and the slowest answers well inside the budget.
const admitShare = 3

// releaseTimeout bounds a release: it runs even when the shopper has gone,
// so a lock is not left to its TTL just because a client hung up.
const releaseTimeout = 2 * time.Second

// Purchase is one order: Qty units of SKU for User, under the lock variant
// Lock, optionally with an Idempotency-Key.
type Purchase struct {
	SKU            string
	Qty            int64
	User           string
	Lock           string
	IdempotencyKey string
}

// Validate checks what can be checked without the database.
func (p Purchase) Validate() error {
	if err := validUser(p.User); err != nil {
		return err
	}
	if p.Qty <= 0 || p.Qty > MaxQty {
		return fmt.Errorf("%w: qty must be between 1 and %d, got %d", ErrInvalidQty, MaxQty, p.Qty)
	}
	return validKey(p.IdempotencyKey)
}

// hash covers what the shopper asked for; the lock variant is how, not what.
func (p Purchase) hash() string {
	return requestHash(struct {
		SKU  string
		Qty  int64
		User string
	}{p.SKU, p.Qty, p.User})
}

// Buy sells p.Qty units of p.SKU under the guard of p.Lock's design: for a
// lock rung, the SKU's lock (read stock, do the business work, then write
// stock − qty and the order in one transaction); a store design (Designs)
// takes no Redis lock and guards its own way. replay is true when an
// earlier order with the same Idempotency-Key and request is returned
// instead of a new one.
func (s *Service) Buy(ctx context.Context, p Purchase) (order Order, replay bool, err error) {
	if err := p.Validate(); err != nil {
		return Order{}, false, err
	}
	g, err := s.guard(p.Lock)
	if err != nil {
		return Order{}, false, err
	}
	return g.buy(ctx, purchase{Purchase: p, hash: p.hash(), deadline: s.budget()})
}

// purchase is an order on its way: what the shopper asked, its request's
// hash and budget (budget.go), and the sale it began in, read before the
// lock.
type purchase struct {
	Purchase
	hash     string
	deadline time.Time
	sale     int64
}

// key is the order's Idempotency-Key, of its user.
func (p purchase) key() userKey { return userKey{p.User, p.IdempotencyKey} }

// readAhead is a way to make an order's reads before the lock: alone, or
// shared with the SKU's other orders (shared_reads.go).
type readAhead func(ctx context.Context, p purchase) (Product, Order, bool, error)

// beforeLock makes p's reads before the lock by read and notes the sale p
// began in. It stops the order there with the earlier order its key made
// (found), sold out, or a failed read. The key is checked before the lock
// (a retry costs no lock round trip), again under it, and the unique index
// settles the rest.
func (s *Service) beforeLock(ctx context.Context, p *purchase, read readAhead) (earlier Order, found bool, err error) {
	wait, cancel := waiting(ctx, p.deadline)
	defer cancel()
	prod, earlier, found, err := read(wait, *p)
	if err != nil || found {
		return earlier, found, s.overBudget(ctx, err, "reading sku:"+p.SKU)
	}
	p.sale = prod.Sale
	// Sold out already: no need to queue for the lock. The check under the
	// lock is the one that counts; this one only sheds load.
	return Order{}, false, soldOut(p.SKU, prod.Stock, p.Qty)
}

// buy sells p alone: its reads before the lock, then the guard's section
// under the SKU's lock.
func (a alone) buy(ctx context.Context, p purchase) (order Order, replay bool, err error) {
	s := a.s
	if earlier, found, err := s.beforeLock(ctx, &p, s.readAlone); err != nil || found {
		return earlier, found, err
	}
	err = s.underLock(ctx, p.deadline, a.locker, "sku:"+p.SKU, func(ctx context.Context, lease *lock.Lease) error {
		var after int64
		order, replay, after, err = a.sell(ctx, p, lease)
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			order, replay, err = s.duplicateOrder(ctx, p.User, p.IdempotencyKey, p.hash)
			return err
		}
		if err != nil || replay {
			return err
		}
		order.StockLeft = &after
		s.notify(Change{Type: "stock", SKU: p.SKU, Stock: &after, Owner: lease.Owner()})
		return nil
	})
	if err != nil {
		return Order{}, false, err
	}
	return order, replay, nil
}

// buy is the section of a lock rung and of db-guard (which holds a lock
// that locks nothing): read, check, work, then write as w says. It returns
// the stock after the write; replay when the Idempotency-Key found an
// earlier order; a gorm.ErrDuplicatedKey for the caller to resolve.
func (s *Service) buy(ctx context.Context, p purchase, lease *lock.Lease, w writeRule) (order Order, replay bool, after int64, err error) {
	rctx, cancel := storeStep(ctx)
	defer cancel()
	prod, err := s.readFenced(rctx, lease, p.SKU)
	if err != nil {
		return Order{}, false, 0, storeLate(rctx, err, "reading sku:"+p.SKU+" under its lease")
	}
	if o, found, err := s.orderByKey(rctx, s.db, p.User, p.IdempotencyKey, p.hash); err != nil || found {
		return o, found, 0, storeLate(rctx, err, "reading the order's key under its lease")
	}
	if err := soldOut(p.SKU, prod.Stock, p.Qty); err != nil {
		return Order{}, false, 0, err
	}
	if err := s.doWork(ctx, lease); err != nil {
		return Order{}, false, 0, err
	}
	token, fenced := lease.Token()
	order = newOrder(p.Purchase, p.hash, prod.PriceCents, token, fenced)
	after, err = s.commitOrder(ctx, p.sale, prod.Stock, token, fenced, w, &order)
	return order, false, after, err
}

// newOrder is the order row a sale writes.
func newOrder(p Purchase, hash string, price int64, token uint64, fenced bool) Order {
	return Order{
		SKU: p.SKU, Qty: p.Qty, User: p.User, Lock: p.Lock, Fence: fencePtr(token, fenced),
		IdempotencyKey: keyPtr(p.IdempotencyKey), RequestHash: hash, TotalCents: price * p.Qty,
	}
}

// registerFence raises the row's fence to token before the holder reads it.
// Only a strictly higher token gets in: a node that lost its counter hands
// out token values again, and two holders sharing one value must not both
// pass. A row that already carries this token or a higher one means another
// holder registered first: this one is stale.
func (s *Service) registerFence(ctx context.Context, table, where string, token uint64, id ...any) error {
	args := append(append([]any{int64(token)}, id...), int64(token))
	var res *gorm.DB
	if err := s.inStore(ctx, table+" row", func(conn *gorm.DB) error {
		res = conn.Exec("UPDATE "+table+" SET fence = ? WHERE "+where+" AND fence < ?", args...)
		return res.Error
	}); err != nil {
		return fmt.Errorf("register fencing token: %w", err)
	}
	if res.RowsAffected == 0 {
		s.stats.StaleFence.Add(1)
		s.log.Warn("stale fencing token refused at registration", "table", table, "row", id, "token", token)
		return fmt.Errorf("%w: token %d is older than the one %s %v has seen", ErrStaleFence, token, table, id)
	}
	return nil
}

// doWork is the configured business work, then the fault points before the
// write (beforeWrite). Both callers write right after it.
func (s *Service) doWork(ctx context.Context, lease *lock.Lease) error {
	if err := s.businessWork(ctx); err != nil {
		return err
	}
	return s.beforeWrite(ctx, lease)
}

// beforeWrite is the in-critical-section fault point, where an injected
// pause freezes the holder past its TTL, then the lease's check just before
// the write (every variant refuses a lease known lost, lock.Lease.Err;
// lua+check also asks the node), which the after-lease-check fault point
// follows.
func (s *Service) beforeWrite(ctx context.Context, lease *lock.Lease) error {
	if err := lease.Checkpoint(ctx, fault.InCriticalSection); err != nil {
		return s.leaseError(lease, err)
	}
	return s.checkLease(ctx, lease)
}

// checkLease is the lease's check just before a write and the
// after-lease-check fault point (lock.Lease.CheckBeforeWrite), answered as
// the sale answers them.
func (s *Service) checkLease(ctx context.Context, lease *lock.Lease) error {
	return s.leaseError(lease, lease.CheckBeforeWrite(ctx))
}

// leaseError is a fault point's or a lease check's error as the sale
// answers it: a crashed holder, a lost lease, or err itself.
func (s *Service) leaseError(lease *lock.Lease, err error) error {
	switch {
	case errors.Is(err, fault.ErrCrashed):
		return fmt.Errorf("%w: %w", ErrHolderCrashed, err)
	case errors.Is(err, lock.ErrLockLost):
		s.log.Warn("lease lost before the write: nothing written", "lock", lease.Key(), "err", err)
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	return err
}

// businessWork is the configured business work of one order (a payment call, say):
// it ends early, with the cause, when ctx does.
func (s *Service) businessWork(ctx context.Context) error {
	d := s.Work()
	if d <= 0 {
		return nil
	}
	if !clock.Sleep(ctx, d) {
		return context.Cause(ctx)
	}
	return nil
}

// underLock runs fn holding the named lock, waiting for it until the
// request's deadline (budget.go). The lease is released afterwards even if the shopper has
// gone, except after an injected crash: a dead process releases nothing. A
// release error after the work is logged and counted, not returned: what was
// committed stands.
func (s *Service) underLock(ctx context.Context, deadline time.Time, locker *lock.Locker, name string, fn func(context.Context, *lock.Lease) error) error {
	// Past saturation a longer line adds latency, never sales (the lock is
	// busy all the same), so a request that would wait behind it for more
	// than a third of its budget is told busy now rather than at the end.
	if ahead := locker.ExpectedWait(name); ahead > s.lockWait/admitShare {
		return fmt.Errorf("%w: %s: about %v of waiters ahead, more than a third of the %v wait", ErrLineTooLong, name,
			ahead.Round(time.Millisecond), s.lockWait)
	}
	wctx, cancel := waiting(ctx, deadline)
	lease, err := locker.Acquire(wctx, name)
	cancel()
	if err != nil {
		return s.acquireError(ctx, locker, name, err)
	}
	err = fn(ctx, lease)
	if errors.Is(err, ErrHolderCrashed) {
		s.stats.Crashes.Add(1)
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if rerr := lease.Release(rctx); rerr != nil {
		s.stats.ReleaseErrors.Add(1)
		s.log.Warn("lock release failed after the critical section", "lock", name, "err", rerr)
	}
	return err
}

// acquireError sorts a failed acquire into what the shopper is told: a crash,
// a client that went away, Redis down, or simply busy.
func (s *Service) acquireError(ctx context.Context, locker *lock.Locker, name string, err error) error {
	switch {
	case errors.Is(err, fault.ErrCrashed):
		s.stats.Crashes.Add(1)
		return fmt.Errorf("%w: acquiring %s: %w", ErrHolderCrashed, name, err)
	case ctx.Err() != nil:
		return fmt.Errorf("waiting for lock %s: %w", name, context.Cause(ctx))
	case errors.Is(err, lock.ErrUnavailable):
		return fmt.Errorf("%w: %s: %w", ErrLockUnavailable, name, err)
	default:
		return fmt.Errorf("%w: %s not obtained within %v: %w", ErrLockBusy, name, s.lockWait, err)
	}
}

// product reads one product on db: s.reads before the lock, s.db under it.
func (s *Service) product(ctx context.Context, db *gorm.DB, sku string) (Product, error) {
	var p Product
	err := db.WithContext(ctx).Where("sku = ?", sku).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Product{}, fmt.Errorf("%w %q", ErrUnknownSKU, sku)
	}
	if err != nil {
		return Product{}, fmt.Errorf("read product: %w", err)
	}
	return p, nil
}

// readFenced is how a lock rung's sale of one SKU begins under its lease,
// for one order or a batch: register the holder's fencing token on the
// SKU's row (fenced rungs only), then read the product whose stock the
// sale checks and writes.
func (s *Service) readFenced(ctx context.Context, lease *lock.Lease, sku string) (Product, error) {
	if token, fenced := lease.Token(); fenced {
		if err := s.registerFence(ctx, "products", "sku = ?", token, sku); err != nil {
			return Product{}, err
		}
	}
	return s.product(ctx, s.db, sku)
}

// soldOut is the answer to qty units of sku when left remain, nil when
// they suffice: the check before the lock, the one under it that counts,
// and a batch's allotment.
func soldOut(sku string, left, qty int64) error {
	if qty > left {
		return fmt.Errorf("%w: %s has %d left, %d asked", ErrSoldOut, sku, left, qty)
	}
	return nil
}
