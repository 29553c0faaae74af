package inventory

import (
	"context"
	"fmt"
	"slices"

	"flashsale/lock"
	"flashsale/lock/ladder"
)

// The store's guards.
//
// A guard is what keeps one design's sale right. For a lock rung it is the
// Redis lock (lock_guard.go), with the store's token check where the lease
// carries a token. The store's own designs take no Redis lock and are the
// guard themselves: one conditional write (db_guard.go), the row's lock in
// the database (for_update.go), the stock held in Redis (redis_stock.go).
// The store picks a variant's guard once, where a request names it
// (Service.guard); nothing beneath asks for the name again.

// guard sells one order or books one seat, from the reads before the lock
// to the answer.
type guard interface {
	buy(ctx context.Context, p purchase) (Order, bool, error)
	grab(ctx context.Context, r seatGrab) (Booking, bool, error)
}

// section is a design's critical section: what runs under the lease its
// sale holds, from the read that counts to the write. A
// gorm.ErrDuplicatedKey comes back for the caller to resolve.
type section interface {
	sell(ctx context.Context, p purchase, lease *lock.Lease) (order Order, replay bool, after int64, err error)
	book(ctx context.Context, r seatGrab, lease *lock.Lease) (booking Booking, replay bool, err error)
}

// alone is the guard that sells each order on its own: the reads before
// the lock, the lock, the design's section under it (sale.go, seats.go).
type alone struct {
	s      *Service
	locker *lock.Locker // the rung's lock; for a store design, one that locks nothing
	section
}

// Design is one of the store's designs: a variant that takes no Redis lock,
// because the store keeps its sale right. The workshop teaches them beside
// lock's ladder, under the same header (X-Lock-Variant).
type Design struct {
	Name    string // as in the X-Lock-Variant header
	File    string // the file that implements it, from the repository's root
	Correct bool   // it keeps the sale right under the faults its design answers
}

// design is a Design with the section that guards its sale.
type design struct {
	Design
	section func(*Service) section
}

// designs are the store's designs in teaching order, each declared in its
// own file.
var designs = []design{dbGuardDesign, forUpdateDesign, redisStockDesign}

// Designs lists the store's designs in teaching order.
func Designs() []Design {
	out := make([]Design, len(designs))
	for i, d := range designs {
		out[i] = d.Design
	}
	return out
}

// designGuards builds each design's guard, once, for New.
func (s *Service) designGuards() (map[string]guard, error) {
	out := make(map[string]guard, len(designs))
	for _, d := range designs {
		locker, err := designLocker(s.lockers, d.Name)
		if err != nil {
			return nil, err
		}
		out[d.Name] = alone{s: s, locker: locker, section: d.section(s)}
	}
	return out, nil
}

// designLocker is the lock a design's sale holds: one that locks nothing,
// under the design's name (With), so that the design's fault points, owner
// value and lease events are those of any sale.
func designLocker(lockers *lock.Client, name string) (*lock.Locker, error) {
	locker, err := lockers.Locker(name)
	if err != nil {
		return nil, fmt.Errorf("inventory: the lockers have no rung for the store's design %q (make them with inventory.With): %w", name, err)
	}
	return locker, nil
}

// With is o with a rung for each of the store's designs, under its name,
// that takes no lock at all: the lockers a Service is given must be made
// with it.
func With(o lock.Options) lock.Options {
	o.Rungs = slices.Clone(o.Rungs)
	for _, d := range designs {
		o.Rungs = append(o.Rungs, ladder.Unlocked(d.Name))
	}
	return o
}

// guard is the named variant's guard: a store design's, else the lock
// rung's of that name, which batching wraps.
func (s *Service) guard(variant string) (guard, error) {
	if g, ok := s.designs[variant]; ok {
		return g, nil
	}
	locker, err := s.lockers.Locker(variant)
	if err != nil {
		return nil, err
	}
	rung := lockGuard{s}
	return batching{alone: alone{s: s, locker: locker, section: rung}, rung: rung}, nil
}
