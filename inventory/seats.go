package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"flashsale/lock"
)

// SeatRequest is one seat grab: Seat of Event for User, under the lock
// variant Lock, optionally with an Idempotency-Key.
type SeatRequest struct {
	Event          string
	Seat           string
	User           string
	Lock           string
	IdempotencyKey string
}

// Validate checks what can be checked without the database.
func (r SeatRequest) Validate() error {
	if err := validUser(r.User); err != nil {
		return err
	}
	return validKey(r.IdempotencyKey)
}

func (r SeatRequest) hash() string {
	return requestHash(struct {
		Event, Seat, User string
	}{r.Event, r.Seat, r.User})
}

// Grab books one seat under the guard of r.Lock's design: for a lock rung,
// the seat's lock (read whether it is booked, do the business work, then
// insert the booking). In workshop mode only the lock (and a fence, when
// on) keeps a second booking out; production mode adds a unique index on
// (event, seat). A store design (Designs) takes no Redis lock and books its
// own way.
func (s *Service) Grab(ctx context.Context, r SeatRequest) (booking Booking, replay bool, err error) {
	if err := r.Validate(); err != nil {
		return Booking{}, false, err
	}
	g, err := s.guard(r.Lock)
	if err != nil {
		return Booking{}, false, err
	}
	return g.grab(ctx, seatGrab{SeatRequest: r, hash: r.hash(), deadline: s.budget()})
}

// seatGrab is a seat grab on its way: what the shopper asked, its request's
// hash and budget (budget.go), and the sale it began in, read before the
// lock.
type seatGrab struct {
	SeatRequest
	hash     string
	deadline time.Time
	sale     int64
}

// grab books r alone: its reads before the lock, then the guard's section
// under the seat's lock.
func (a alone) grab(ctx context.Context, r seatGrab) (booking Booking, replay bool, err error) {
	s := a.s
	name := "seat:" + r.Event + ":" + r.Seat
	if earlier, found, err := s.seatBeforeLock(ctx, &r); err != nil || found {
		return earlier, found, s.overBudget(ctx, err, "reading "+name)
	}
	err = s.underLock(ctx, r.deadline, a.locker, name, func(ctx context.Context, lease *lock.Lease) error {
		booking, replay, err = a.book(ctx, r, lease)
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			booking, replay, err = s.duplicateBooking(ctx, r.SeatRequest, r.hash)
			return err
		}
		if err != nil || replay {
			return err
		}
		s.notify(Change{Type: "seat", Event: r.Event, Seat: r.Seat, User: r.User, Owner: lease.Owner()})
		return nil
	})
	if err != nil {
		return Booking{}, false, err
	}
	return booking, replay, nil
}

// seatBeforeLock makes r's reads before the lock and notes the sale r
// began in. It stops the grab there with the earlier booking its key made
// (found), the seat taken, or a failed read.
func (s *Service) seatBeforeLock(ctx context.Context, r *seatGrab) (earlier Booking, found bool, err error) {
	wait, cancel := waiting(ctx, r.deadline)
	defer cancel()
	if r.sale, err = s.seatSale(wait, r.Event, r.Seat); err != nil {
		return Booking{}, false, err
	}
	if earlier, found, err = s.bookingByKey(wait, r.User, r.IdempotencyKey, r.hash); err != nil || found {
		return earlier, found, err
	}
	// Taken already: shed the load before the lock; the check under it counts.
	if taken, err := s.seatTaken(wait, r.Event, r.Seat); err != nil || !taken {
		return Booking{}, false, err
	}
	return Booking{}, false, fmt.Errorf("%w: %s %s", ErrSeatTaken, r.Event, r.Seat)
}

// grab is the section of a lock rung and of db-guard: check, work, then
// book as w says. replay when the Idempotency-Key found an earlier
// booking; a gorm.ErrDuplicatedKey for the caller.
func (s *Service) grab(ctx context.Context, r seatGrab, lease *lock.Lease, w writeRule) (Booking, bool, error) {
	token, fenced := lease.Token()
	rctx, cancel := storeStep(ctx)
	defer cancel()
	what := "reading seat " + r.Event + " " + r.Seat + " under its lease"
	if fenced {
		if err := s.registerFence(rctx, "seats", "event_id = ? AND label = ?", token, r.Event, r.Seat); err != nil {
			return Booking{}, false, storeLate(rctx, err, what)
		}
	}
	if b, found, err := s.bookingByKey(rctx, r.User, r.IdempotencyKey, r.hash); err != nil || found {
		return b, found, storeLate(rctx, err, what)
	}
	taken, err := s.seatTaken(rctx, r.Event, r.Seat)
	if err != nil {
		return Booking{}, false, storeLate(rctx, err, what)
	}
	if taken {
		return Booking{}, false, fmt.Errorf("%w: %s %s", ErrSeatTaken, r.Event, r.Seat)
	}
	if err := s.doWork(ctx, lease); err != nil {
		return Booking{}, false, err
	}
	b := newBooking(r, token, fenced)
	return b, false, s.commitBooking(ctx, &b, r.sale, token, fenced, w)
}

// newBooking is the booking row a seat grab writes.
func newBooking(r seatGrab, token uint64, fenced bool) Booking {
	return Booking{
		EventID: r.Event, Seat: r.Seat, User: r.User, Lock: r.Lock, Fence: fencePtr(token, fenced),
		IdempotencyKey: keyPtr(r.IdempotencyKey), RequestHash: r.hash,
	}
}

// duplicateBooking resolves a unique violation on insert: the idempotency
// key (a concurrent twin won) or, in production mode, the seat index (the
// database caught a second holder the lock let in).
func (s *Service) duplicateBooking(ctx context.Context, r SeatRequest, hash string) (Booking, bool, error) {
	rctx, cancel := storeStep(context.WithoutCancel(ctx))
	defer cancel()
	b, found, err := s.bookingByKey(rctx, r.User, r.IdempotencyKey, hash)
	if err != nil || found {
		return b, found, storeLate(rctx, err, "reading the booking's key")
	}
	s.stats.GuardRejections.Add(1)
	s.log.Warn("database guard caught a double booking the lock let through", "event", r.Event, "seat", r.Seat)
	return Booking{}, false, fmt.Errorf("%w: %s %s (the database guard refused a second booking)", ErrSeatTaken, r.Event, r.Seat)
}

// seatSale is the sale a seat belongs to; for a seat that does not exist it
// tells an unknown event from an unknown seat.
func (s *Service) seatSale(ctx context.Context, event, seat string) (int64, error) {
	db := s.db.WithContext(ctx)
	var st Seat
	err := db.Select("sale").Where("event_id = ? AND label = ?", event, seat).Take(&st).Error
	if err == nil {
		return st.Sale, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, fmt.Errorf("read seat: %w", err)
	}
	var n int64
	if err := db.Model(&Event{}).Where("id = ?", event).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("read event: %w", err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w %q", ErrUnknownEvent, event)
	}
	return 0, fmt.Errorf("%w %q in %s", ErrUnknownSeat, seat, event)
}

func (s *Service) seatTaken(ctx context.Context, event, seat string) (bool, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&Booking{}).Where("event_id = ? AND seat = ?", event, seat).Count(&n).Error; err != nil {
		return false, fmt.Errorf("read bookings: %w", err)
	}
	return n > 0, nil
}
