// Package checker reads what a chaos run recorded — the app processes'
// history of leases and store writes, the client's record of the answers
// it got, the nemesis's log of the faults it caused — together with the
// database, and finds every violation, per lock variant.
//
// It shares no logic with the system under test: it imports neither
// flashsale/lock nor flashsale/inventory, reads the JSON lines in the one
// format that internal/history defines for every writer (plain fields,
// nothing of the app), and queries the database with plain SQL.
// What it checks:
//
//   - lock safety: two leases on one key whose holders both believed them
//     exclusive at the same moment (not for a store-guarded variant, whose
//     leases guard nothing: Scope.StoreGuarded). A holder believes its lease from the
//     moment it was granted until the earliest of its validity's end, its
//     release and its loss. A fenced lease also ends as soon as a lease of
//     the key with a higher token exists: from then on the store refuses
//     it, so the fence, not the clock, is what makes it exclusive. Two
//     fenced leases overlap only when they carry the same token (a counter
//     handed a value out twice). A fenced lease granted after a lease of
//     its key with a higher token (tokens went backwards across holders:
//     a write-back that missed, a counter lost, or votes that came first
//     and a reply that came late) is counted as a token inversion: worth
//     knowing, harmless while the store checks tokens, which refuses it.
//   - stale writes: a fenced order committed after an order with a higher
//     token on the same SKU (the store let an older holder through).
//   - oversold units and lost updates per SKU, and double-booked seats,
//     from the database alone.
//   - stuck locks: lock keys without a TTL (found by the caller's own scan
//     of the Redis nodes).
//   - lost acknowledged orders: a 201 the client saw whose order or booking
//     is not in the database.
//
// Each variant's verdict is "holds" when all of these are zero and
// "breaks" otherwise, with the first violation's time and the nemesis
// events around it.
package checker

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verdicts.
const (
	Holds  = "holds"
	Breaks = "breaks"
)

// Violation kinds.
const (
	LockOverlap           = "lock-overlap"
	StaleWrite            = "stale-write"
	Oversold              = "oversold"
	LostUpdate            = "lost-update"
	DoubleBooked          = "double-booked"
	StuckLock             = "stuck-lock"
	LostAcknowledgedOrder = "lost-acknowledged-order"
)

// Scope is what of the sale belongs to one lock variant: the chaos runner
// gives every variant its own SKUs and seats, so variants can run side by
// side and still be judged apart.
type Scope struct {
	Variant string   `json:"variant"`
	SKUs    []string `json:"skus"`
	Event   string   `json:"event,omitempty"`
	Seats   []string `json:"seats,omitempty"`
	// StoreGuarded is a variant whose sale the store guards, not a Redis
	// lock: the leases it records guard nothing, so two of them at once
	// are no violation. Such a variant is judged by the sale's data alone.
	StoreGuarded bool `json:"store_guarded,omitempty"`
}

// lockKeys are the lock names (as the history records them) of the scope.
func (s Scope) lockKeys() map[string]bool {
	out := map[string]bool{}
	for _, sku := range s.SKUs {
		out["sku:"+sku] = true
	}
	for _, seat := range s.Seats {
		out["seat:"+s.Event+":"+seat] = true
	}
	return out
}

// Input is everything a check reads.
type Input struct {
	// Records are every line of every history, client and nemesis file.
	Records []Record
	// DB is the sale's database (read only).
	DB *sql.DB
	// Scopes are the variants to judge.
	Scopes []Scope
	// StuckLockKeys are Redis keys found without a TTL after the run.
	StuckLockKeys []string
	// Around is how far before a violation nemesis events are shown next
	// to it. Default 5s.
	Around time.Duration
}

// Violation is one thing that went wrong.
type Violation struct {
	Time   time.Time `json:"t"`
	Kind   string    `json:"kind"`
	Key    string    `json:"key,omitempty"`
	Detail string    `json:"detail"`
	// Nemesis are the faults active at Time or begun shortly before it.
	Nemesis []string `json:"nemesis,omitempty"`
}

// Counts are what the checker found wrong with one variant, thing by
// thing: the checker's result and the chaos report's verdict both carry
// them.
type Counts struct {
	LockOverlaps           int64 `json:"lock_overlaps"`
	StaleWrites            int64 `json:"stale_writes"`
	OversoldUnits          int64 `json:"oversold_units"`
	LostUpdates            int64 `json:"lost_updates"`
	DoubleBookedSeats      int64 `json:"double_booked_seats"`
	StuckLocks             int64 `json:"stuck_locks"`
	LostAcknowledgedOrders int64 `json:"lost_acknowledged_orders"`
	// TokenInversions are fenced leases granted with a lower token than a
	// lease of their key granted before them; the store refuses them, so
	// they are no violation.
	TokenInversions int64 `json:"token_inversions"`
}

// Broken reports whether any count is a violation (token inversions are
// not).
func (c Counts) Broken() bool {
	return c.LockOverlaps+c.StaleWrites+c.OversoldUnits+c.LostUpdates+c.DoubleBookedSeats+c.StuckLocks+c.LostAcknowledgedOrders > 0
}

// Result is the verdict on one variant.
type Result struct {
	Variant string `json:"variant"`
	Verdict string `json:"verdict"`
	// Counts are the violations found, by kind.
	Counts
	// Leases, Writes and Acks are how much history the verdict rests on.
	Leases int `json:"leases"`
	Writes int `json:"writes"`
	Acks   int `json:"acks"`
	// Orders and Bookings are the variant's rows in the database.
	Orders   int64 `json:"orders"`
	Bookings int64 `json:"bookings"`
	// FirstViolation is the earliest violation with a time.
	FirstViolation *Violation `json:"first_violation,omitempty"`
	// Violations are the first violations found, in time order (at most
	// maxViolations).
	Violations []Violation `json:"violations,omitempty"`
}

const maxViolations = 50

// Check judges every scope.
func Check(ctx context.Context, in Input) ([]Result, error) {
	if in.Around <= 0 {
		in.Around = 5 * time.Second
	}
	h := index(in.Records)
	out := make([]Result, 0, len(in.Scopes))
	for _, sc := range in.Scopes {
		r, err := checkScope(ctx, in, h, sc)
		if err != nil {
			return nil, fmt.Errorf("checker: %s: %w", sc.Variant, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func checkScope(ctx context.Context, in Input, h *indexed, sc Scope) (Result, error) {
	r := Result{Variant: sc.Variant}
	var vs []Violation
	keys := sc.lockKeys()

	leases := h.leasesFor(sc.Variant, keys)
	r.Leases = len(leases)
	if !sc.StoreGuarded {
		ov, inv := overlaps(leases)
		r.LockOverlaps, r.TokenInversions = int64(len(ov)), int64(inv)
		vs = append(vs, ov...)
	}

	writes := h.writesFor(leases)
	r.Writes = len(writes)

	db, err := readDB(ctx, in.DB, sc)
	if err != nil {
		return Result{}, err
	}
	r.Orders, r.Bookings = int64(len(db.orders)), int64(len(db.bookings))
	for _, v := range db.violations(writes) {
		switch v.Kind {
		case StaleWrite:
			r.StaleWrites++
		case DoubleBooked:
			r.DoubleBookedSeats++
		}
		vs = append(vs, v)
	}
	r.OversoldUnits, r.LostUpdates = db.oversold, db.lostUpdates

	for _, k := range in.StuckLockKeys {
		for name := range keys {
			if strings.HasSuffix(k, "lock:"+name) {
				r.StuckLocks++
				vs = append(vs, Violation{Kind: StuckLock, Key: name, Detail: "lock key " + k + " has no TTL after the run"})
			}
		}
	}

	acks := h.acksFor(sc.Variant)
	r.Acks = len(acks)
	for _, a := range acks {
		if a.Status != 201 {
			continue
		}
		var ok bool
		switch a.Op {
		case "seat":
			ok = db.bookingKeys[a.IdempotencyKey]
		default:
			ok = db.orderKeys[a.IdempotencyKey]
		}
		if !ok {
			r.LostAcknowledgedOrders++
			vs = append(vs, Violation{Time: a.Time, Kind: LostAcknowledgedOrder, Key: a.IdempotencyKey,
				Detail: fmt.Sprintf("the client got 201 for %s %s, the database has no such %s", a.Op, a.IdempotencyKey, what(a.Op))})
		}
	}

	// Violations without a time (stuck locks, an audit figure) go last.
	slices.SortStableFunc(vs, func(a, b Violation) int {
		switch {
		case a.Time.IsZero() && b.Time.IsZero():
			return 0
		case a.Time.IsZero():
			return 1
		case b.Time.IsZero():
			return -1
		}
		return a.Time.Compare(b.Time)
	})
	for i := range vs {
		if !vs[i].Time.IsZero() {
			vs[i].Nemesis = h.around(vs[i].Time, in.Around)
		}
	}
	if len(vs) > maxViolations {
		vs = vs[:maxViolations]
	}
	r.Violations = vs
	if len(vs) > 0 && !vs[0].Time.IsZero() {
		r.FirstViolation = &vs[0]
	}
	r.Verdict = Holds
	if r.Broken() {
		r.Verdict = Breaks
		if r.FirstViolation == nil && len(vs) > 0 {
			r.FirstViolation = &vs[0]
		}
	}
	return r, nil
}

func what(op string) string {
	if op == "seat" {
		return "booking"
	}
	return "order"
}

// lease is one grant as its holder saw it.
type lease struct {
	owner, key, proc, variant string
	token                     uint64
	fenced                    bool
	acquired, end             time.Time // the holder believed it exclusive in [acquired, end)
}

// overlaps finds pairs of leases on one key that were believed exclusive
// at once, each reported at the moment the later one began, and counts
// the token inversions clip found.
func overlaps(ls []lease) ([]Violation, int) {
	byKey := map[string][]lease{}
	for _, l := range ls {
		byKey[l.key] = append(byKey[l.key], l)
	}
	var out []Violation
	inversions := 0
	for _, key := range sortedKeys(byKey) {
		group := byKey[key]
		inversions += clip(group)
		// A sweep in order of acquisition: active holds the leases still
		// believed when the next one begins.
		var active []lease
		for _, b := range group {
			active = slices.DeleteFunc(active, func(a lease) bool { return !b.acquired.Before(a.end) })
			if !b.acquired.Before(b.end) {
				continue // never believed: a late grant, or a superseded token
			}
			for _, a := range active {
				if a.acquired.Before(b.end) {
					out = append(out, Violation{Time: b.acquired, Kind: LockOverlap, Key: key, Detail: fmt.Sprintf(
						"%s (%s, token %d) acquired while %s (%s, token %d, acquired %s) still believed it held the lock until %s",
						short(b.owner), b.proc, b.token, short(a.owner), a.proc, a.token,
						a.acquired.Format("15:04:05.000"), a.end.Format("15:04:05.000"))})
				}
			}
			active = append(active, b)
		}
	}
	return out, inversions
}

// clip sorts one key's leases by acquisition and ends each fenced lease
// where a lease with a higher token exists: at that lease's start, or at
// its own start if the other began first. It counts the token inversions:
// fenced leases granted after one with a higher token.
func clip(group []lease) int {
	slices.SortFunc(group, func(a, b lease) int { return a.acquired.Compare(b.acquired) })
	var longest time.Duration
	for _, l := range group {
		longest = max(longest, l.end.Sub(l.acquired))
	}
	inversions := 0
	var highest uint64
	for i := range group {
		l := &group[i]
		if !l.fenced {
			continue
		}
		if l.token < highest {
			inversions++
		}
		highest = max(highest, l.token)
		// Begun earlier, still believed when l began, with a higher token.
		for j := i - 1; j >= 0 && !group[j].acquired.Before(l.acquired.Add(-longest)); j-- {
			if o := group[j]; o.token > l.token && l.acquired.Before(o.end) {
				l.end = l.acquired
				break
			}
		}
		for j := i + 1; j < len(group) && group[j].acquired.Before(l.end); j++ {
			if group[j].token > l.token {
				l.end = group[j].acquired
				break
			}
		}
	}
	return inversions
}

// Span is one lease as the checker judges it: believed exclusive from
// From until To.
type Span struct {
	Proc     string    `json:"proc"`
	Token    uint64    `json:"token,omitempty"`
	From, To time.Time `json:"-"`
}

// Holders are the leases of one variant on one lock name, in order of
// acquisition, each ending where the checker ends it: for a timeline.
func Holders(recs []Record, variant, key string) []Span {
	group := index(recs).leasesFor(variant, map[string]bool{key: true})
	clip(group)
	out := make([]Span, len(group))
	for i, l := range group {
		out[i] = Span{Proc: l.proc, Token: l.token, From: l.acquired, To: l.end}
	}
	return out
}

func short(owner string) string {
	if len(owner) > 8 {
		return "lease " + owner[:8]
	}
	return "lease " + owner
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmp.Compare)
	return out
}
