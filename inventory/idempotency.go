package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// Idempotency-Keys. A key is unique per user and route (the unique index
// on orders and on bookings); the request's fingerprint tells a retry,
// which gets the first answer again, from a reuse of the key for another
// request, which is refused. A sale alone looks its key up before the lock
// and again under it; a batch looks all its keys up in one query and
// settles the twins within it.

// validKey accepts an empty key (none) or 1 to MaxKeyLen visible ASCII bytes.
func validKey(k string) error {
	if len(k) > MaxKeyLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidKey, MaxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return fmt.Errorf("%w: only visible ASCII characters are allowed", ErrInvalidKey)
		}
	}
	return nil
}

// requestHash fingerprints what a request asks for, so a retry with the same
// Idempotency-Key can be told from a reuse of the key for something else.
func requestHash(v any) string {
	b, _ := json.Marshal(v) // plain structs of strings and ints always marshal
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// keyPtr is nil for no key, so the unique index ignores keyless rows.
func keyPtr(k string) *string {
	if k == "" {
		return nil
	}
	return &k
}

// keyed is a row an Idempotency-Key finds again: an order or a booking.
type keyed interface {
	Order | Booking
	fingerprint() string
}

func (o Order) fingerprint() string   { return o.RequestHash }
func (b Booking) fingerprint() string { return b.RequestHash }

// byKey finds the row (what: "order", "booking") the user's
// Idempotency-Key already made. found with a nil error means: the same
// request, replay it; a row made by another request is refused.
func byKey[T keyed](ctx context.Context, db *gorm.DB, what, user, key, hash string) (row T, found bool, err error) {
	var none T
	if key == "" {
		return none, false, nil
	}
	err = db.WithContext(ctx).Where("user_name = ? AND idempotency_key = ?", user, key).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return none, false, nil
	case err != nil:
		return none, false, fmt.Errorf("read %s by idempotency key: %w", what, err)
	}
	if err := reused(row.fingerprint(), hash, key); err != nil {
		return none, false, err
	}
	return row, true, nil
}

// reused is the refusal of a request (fingerprint hash) whose key already
// came with another request (fingerprint made), nil for the same request.
func reused(made, hash, key string) error {
	if made != hash {
		return fmt.Errorf("%w: key %q", ErrIdempotencyKeyReused, key)
	}
	return nil
}

// orderByKey finds, reading through db, the order the user's
// Idempotency-Key already made.
func (s *Service) orderByKey(ctx context.Context, db *gorm.DB, user, key, hash string) (Order, bool, error) {
	return byKey[Order](ctx, db, "order", user, key, hash)
}

// bookingByKey finds the booking the user's Idempotency-Key already made.
func (s *Service) bookingByKey(ctx context.Context, user, key, hash string) (Booking, bool, error) {
	return byKey[Booking](ctx, s.db, "booking", user, key, hash)
}

// duplicateOrder resolves a unique violation on insert: only the user's
// idempotency key is unique on orders, so a concurrent twin won the race.
func (s *Service) duplicateOrder(ctx context.Context, user, key, hash string) (Order, bool, error) {
	rctx, cancel := storeStep(context.WithoutCancel(ctx))
	defer cancel()
	o, found, err := s.orderByKey(rctx, s.db, user, key, hash)
	if err != nil {
		return Order{}, false, storeLate(rctx, err, "reading the order's key")
	}
	if !found {
		return Order{}, false, errors.New("insert order: duplicate key, but no order carries the idempotency key")
	}
	return o, true, nil
}

// userKey is one user's Idempotency-Key.
type userKey struct{ user, key string }

// ordersByKeys reads through db, in one query, the orders that the users'
// Idempotency-Keys already made, by user and key. The query names the
// users too: a key is unique per user, and the users lead that index, so
// the query reads only their orders instead of scanning every order.
func ordersByKeys(ctx context.Context, db *gorm.DB, want []userKey) (map[userKey]Order, error) {
	found := map[userKey]Order{}
	if len(want) == 0 {
		return found, nil
	}
	users, keys := make([]string, len(want)), make([]string, len(want))
	wanted := make(map[userKey]bool, len(want))
	for i, k := range want {
		users[i], keys[i] = k.user, k.key
		wanted[k] = true
	}
	var os []Order
	if err := db.WithContext(ctx).Where("user_name IN ? AND idempotency_key IN ?", users, keys).Find(&os).Error; err != nil {
		return nil, fmt.Errorf("read orders by idempotency key: %w", err)
	}
	for _, o := range os {
		if k := (userKey{o.User, *o.IdempotencyKey}); wanted[k] {
			found[k] = o
		}
	}
	return found, nil
}

// keysOf are the Idempotency-Keys of a batch's orders that carry one.
func keysOf(batch []*batchOrder) []userKey {
	var keys []userKey
	for _, o := range batch {
		if o.p.IdempotencyKey != "" {
			keys = append(keys, o.p.key())
		}
	}
	return keys
}

// replayOf is the answer to o when its key already made order e: a replay
// of the same request, or a key reused for another.
func replayOf(e Order, o *batchOrder) answer {
	if err := reused(e.RequestHash, o.p.hash, o.p.IdempotencyKey); err != nil {
		return answer{err: err}
	}
	return answer{order: e, replay: true}
}

// twinAnswer is the answer to twin, which came in the same batch as first
// with the same user and key: first's order as a replay, first's refusal,
// or a key reused for another request.
func twinAnswer(a answer, first, twin *batchOrder) answer {
	if err := reused(first.p.hash, twin.p.hash, twin.p.IdempotencyKey); err != nil {
		return answer{err: err}
	}
	switch {
	case a.err == nil:
		return answer{order: a.order, replay: true}
	case first.ctx.Err() != nil:
		// The first request went away: that says nothing about this one,
		// which may simply try again.
		return answer{err: fmt.Errorf("%w: the same request in this batch ended before it was written", ErrLockBusy)}
	}
	return answer{err: a.err}
}
