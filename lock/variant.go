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

// rung is one variant the lockers run: its name and the traits a Locker
// needs to know of it, declared once (library) or registered (Options.Rungs).
type rung struct {
	Name string // as in the X-Lock-Variant header
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

	build func(p parts) protocol
}

// parts are what the rungs are built from.
type parts struct {
	first   *redis.Client
	clients []*redis.Client // every node's, first node first
	nodes   []*node.Node
	cfg     *config
}

// library are the rungs a team may run in production, each plain or with
// fencing tokens: the single-node lock and Redlock.
var library = []rung{
	{
		Name: Lua, OwnerChecked: true,
		build: func(p parts) protocol { return luaLock{p.first} },
	},
	{
		Name: Redlock, Quorum: true, OwnerChecked: true, ValidityChecked: true, SelfUndoing: true,
		build: func(p parts) protocol { return redlock{newVoters(p.nodes, p.cfg)} },
	},
	{
		Name: LuaFence, Fenced: true, OwnerChecked: true,
		build: func(p parts) protocol { return luaFence{luaLock{p.first}} },
	},
	{
		Name: RedlockFence, Fenced: true, Quorum: true, OwnerChecked: true, ValidityChecked: true, SelfUndoing: true,
		build: func(p parts) protocol { return redlockFence{redlock{newVoters(p.nodes, p.cfg)}} },
	},
}

// Rung is a lock protocol a Client runs under a name beside the library's
// own (Options.Rungs): how the workshop's ladder adds the broken patterns
// and the Redlocks read beside ours, each in a package of its own.
type Rung struct {
	Name string // as a caller asks Client.Locker for it
	// Quorum rungs need a majority of the nodes to answer; the others the
	// first node.
	Quorum bool
	// OwnerChecked rungs release and extend only a key that still carries
	// the holder's value, in one atomic step: waiters may then stand in
	// line, and a release hand the lease over.
	OwnerChecked bool
	// SelfUndoing rungs delete their value on every node after a failed
	// try themselves; for the other owner-checked rungs the Locker does.
	SelfUndoing bool
	// New makes the rung's protocol over the nodes: clients are the
	// lockers' own, first node first (their timeouts, restart awareness);
	// plain are clients of the same nodes as the caller configured them,
	// for a library that brings its own Redlock and must meet the nodes as
	// its users would; lua is the single-node lock (Lua) on the first
	// node, for a rung that differs from it in a step or two.
	New func(clients, plain []*redis.Client, lua Protocol) Protocol
}

// Protocol is what a Rung does on Redis: take, give back and extend a lease
// on key with the owner value value. At every point between two of its
// steps it calls step with the point's name (Trace.Step); a step's error
// ends the operation, which returns it. Acquire returns how long the lease
// is safe to use from when its first command was sent, ErrNotAcquired when
// the key is held, or ErrUnavailable (wrapped) when a node failed; Release
// and Extend return ErrNotHeld when the key no longer carries value, where
// the rung can tell.
type Protocol interface {
	Acquire(ctx context.Context, step func(context.Context, string) error, key, value string, ttl time.Duration) (time.Duration, error)
	Release(ctx context.Context, step func(context.Context, string) error, key, value string) error
	Extend(ctx context.Context, key, value string, ttl time.Duration) (time.Duration, error)
}

// registered is r as a rung the lockers run.
func registered(r Rung) rung {
	return rung{
		Name: r.Name, Quorum: r.Quorum, OwnerChecked: r.OwnerChecked, SelfUndoing: r.SelfUndoing,
		build: func(p parts) protocol {
			plain := make([]*redis.Client, len(p.nodes))
			for i, n := range p.nodes {
				plain[i] = n.Plain()
			}
			made := r.New(p.clients, plain, inside{luaLock{p.first}})
			if c, ok := made.(checker); ok {
				return checkedOutside{outside{made}, c}
			}
			return outside{made}
		},
	}
}

// outside is a registered rung's Protocol as the lockers call it: on the
// lock key alone (a rung outside the library is not fenced).
type outside struct{ p Protocol }

func (o outside) acquire(ctx context.Context, checkpoint faultPoints, k keys, value string, ttl time.Duration) (grant, error) {
	v, err := o.p.Acquire(ctx, checkpoint, k.lock, value, ttl)
	return grant{validity: v}, err
}

func (o outside) release(ctx context.Context, checkpoint faultPoints, k keys, value string) error {
	return o.p.Release(ctx, checkpoint, k.lock, value)
}

func (o outside) extend(ctx context.Context, k keys, value string, ttl time.Duration) (time.Duration, error) {
	return o.p.Extend(ctx, k.lock, value, ttl)
}

// checker is a registered protocol whose holder checks its lease once
// more before writing (Lease.CheckBeforeWrite): Check reports ErrNotHeld
// when key no longer carries value.
type checker interface {
	Check(ctx context.Context, key, value string) error
}

// checkedOutside is a registered protocol with a lease check
// (leaseChecked).
type checkedOutside struct {
	outside
	c checker
}

func (o checkedOutside) check(ctx context.Context, k keys, value string) error {
	return o.c.Check(ctx, k.lock, value)
}

// inside is a library protocol as a registered rung calls it (Parts.Lua).
type inside struct{ p protocol }

func (i inside) Acquire(ctx context.Context, step func(context.Context, string) error, key, value string, ttl time.Duration) (time.Duration, error) {
	g, err := i.p.acquire(ctx, step, keys{lock: key}, value, ttl)
	return g.validity, err
}

func (i inside) Release(ctx context.Context, step func(context.Context, string) error, key, value string) error {
	return i.p.release(ctx, step, keys{lock: key}, value)
}

func (i inside) Extend(ctx context.Context, key, value string, ttl time.Duration) (time.Duration, error) {
	return i.p.extend(ctx, keys{lock: key}, value, ttl)
}
