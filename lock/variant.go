package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/lock/internal/node"
)

// keys are the Redis keys one lock name maps to.
type keys struct {
	lock  string // the lock itself
	fence string // the fencing counter of this lock
}

// grant is what one successful acquire attempt of a variant yields.
type grant struct {
	validity time.Duration // safe to use, from when the first command was sent
	token    uint64        // fencing token; meaningful only when fenced
}

// faultPoints is called at each point between two steps of a variant's
// operation; it returns fault.ErrCrashed when the operation must end there.
type faultPoints func(ctx context.Context, p fault.Point) error

// noFaultPoints is the faultPoints of an operation no fault reaches: the undo
// of an abandoned try, and a hand-over.
func noFaultPoints(context.Context, fault.Point) error { return nil }

// protocol is what a variant does on Redis: take, give back and extend a
// lease with a given owner value, making exactly the calls the pattern it
// teaches makes, with a fault point wherever that pattern has two steps.
type protocol interface {
	acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error)
	release(ctx context.Context, checkpoint faultPoints, k keys, value string) error
	extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error)
}

// Variant is one lock variant, a rung of the teaching ladder: its name, its
// file and its traits, declared once and read by the lockers, the speed
// layer and the lessons.
type Variant struct {
	Name string // as in the X-Lock-Variant header
	File string // the file that implements it: of this package, or "inventory/…"
	// Quorum variants ask a majority of the nodes (Redlock's); the others
	// ask the first node, or none at all.
	Quorum bool
	// OwnerChecked variants give back (and extend) only a key that still
	// carries the holder's value, in one atomic step: only the holder or the
	// TTL frees it, so waiters can stand in line and a release hand over.
	OwnerChecked bool
	// ValidityChecked variants measure how long a grant stays exclusive
	// (TTL − elapsed − drift) and hand a lease to the caller only while it
	// does.
	ValidityChecked bool
	// Fenced variants issue fencing tokens that the store must check.
	Fenced bool
	// SelfUndoing variants delete their value on every node after a failed
	// try themselves; for the other owner-checked variants the Locker does.
	SelfUndoing bool
	// StoreGuarded variants take no Redis lock: the store keeps the sale right.
	StoreGuarded bool
	// Correct variants keep the sale right under the faults their design
	// answers; the production mode allows only these.
	Correct bool

	build func(p parts) protocol
}

// parts are what the ladder builds its variants from.
type parts struct {
	first   *redis.Client
	clients []*redis.Client // every node's, first node first
	nodes   []*node.Node
	cfg     *config
}
