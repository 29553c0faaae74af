package lock

import "slices"

// Variant names, in ladder order.
const (
	None         = "none"
	SetNXExpire  = "setnx-expire"
	GetDel       = "get-del"
	PlainDel     = "plain-del"
	Lua          = "lua"
	Redlock      = "redlock"
	LuaCheck     = "lua+check"
	LuaFence     = "lua+fence"
	RedlockFence = "redlock+fence"
	// ArticleRedlock is a widely read article's Redlock, as written.
	ArticleRedlock = "article-redlock"
	// Redsync is the Go Redlock library, github.com/go-redsync/redsync/v4.
	Redsync = "redsync"
	// Attendee is the rung the workshop's attendees write (attendee.go).
	Attendee    = "attendee"
	DBGuard     = "db-guard"
	DBForUpdate = "db-for-update"
	RedisStock  = "redis-stock"
)

// Guard is what keeps a rung's sale correct: the Redis lock, or a guard on
// the store side that the inventory applies in place of any lock. The
// store-guarded rungs take no Redis lock at all (like none); the inventory
// picks its write path from this field, never from the rung's name.
type Guard int

// Guards.
const (
	// GuardLock: the Redis lock (and, for a fenced rung, the store's token
	// check) is the guard; the store writes what the holder read.
	GuardLock Guard = iota
	// GuardConditional: one conditional write in the order's transaction
	// (UPDATE … SET stock = stock − q WHERE … AND stock >= q; a seat row
	// marked booked only where it is not yet).
	GuardConditional
	// GuardRowLock: the row is locked in the transaction (SELECT … FOR
	// UPDATE on PostgreSQL; on SQLite the immediate transaction is the
	// lock) while the sale reads, checks, works and writes.
	GuardRowLock
	// GuardRedisStock: the stock lives in Redis and is reserved there by a
	// Lua check-and-DECRBY (a seat by SET NX) before the database write;
	// a failed write gives it back.
	GuardRedisStock
)

// Rung is one variant of the ladder: what the library needs to build it
// and to know what it guarantees. What the workshop teaches about a rung,
// and what a run expects of it, is package curriculum's. Adding a rung is
// its file, one entry in ladder and its lesson there.
type Rung struct {
	Name string // as in the X-Lock-Variant header
	// File is the file of this package that implements the rung, or, for a
	// store-guarded rung, the file of package inventory that does, named
	// "inventory/…".
	File string
	// Quorum rungs ask a majority of the nodes (Redlock's); the others
	// ask the first node, or none at all.
	Quorum bool
	// OwnerChecked rungs give back (and extend) only a key that still
	// carries the holder's value, in one atomic step on each node: nobody
	// but the holder or the TTL frees their key, so their waiters can
	// stand in one line per key and a release can hand the lease over.
	OwnerChecked bool
	// ValidityChecked rungs measure how long a grant stays exclusive
	// (TTL − elapsed − drift) and hand a lease to the caller only while it
	// does.
	ValidityChecked bool
	// Fenced rungs issue fencing tokens that the store must check.
	Fenced bool
	// SelfUndoing rungs delete their value on every node after a failed
	// try themselves; for the other owner-checked rungs the Locker does.
	SelfUndoing bool
	// Guard is what keeps the sale correct; any other than GuardLock means
	// the rung takes no Redis lock and the store guards instead.
	Guard Guard
	// Correct rungs keep the sale right under the faults their design
	// answers; the production mode allows only these.
	Correct bool

	build func(s *Lockers) variant
}

// ladder is the teaching order: no lock, the three broken patterns, the
// correct single-node lock, Redlock, the single-node lock that checks its
// lease before writing, then both locks with fencing tokens; then the
// designs that need no Redis lock at all, where the store is the guard;
// then the Redlock an article teaches and the one a library ships, read
// beside ours; last, the rung the attendees write.
var ladder = []Rung{
	{
		Name: None, File: "none.go",
		build: func(*Lockers) variant { return noLock{} },
	},
	{
		Name: SetNXExpire, File: "setnx_expire.go",
		build: func(s *Lockers) variant { return setnxExpire{s.first()} },
	},
	{
		Name: GetDel, File: "get_del.go",
		build: func(s *Lockers) variant { return getDel{s.first()} },
	},
	{
		Name: PlainDel, File: "plain_del.go",
		build: func(s *Lockers) variant { return plainDel{s.first()} },
	},
	{
		Name: Lua, File: "lua.go", Correct: true, OwnerChecked: true,
		build: func(s *Lockers) variant { return luaLock{s.first()} },
	},
	{
		Name: Redlock, File: "redlock.go", Correct: true,
		Quorum: true, OwnerChecked: true, ValidityChecked: true, SelfUndoing: true,
		build: func(s *Lockers) variant { return s.redlock() },
	},
	{
		Name: LuaCheck, File: "lua_check.go", OwnerChecked: true,
		build: func(s *Lockers) variant { return luaCheck{luaLock{s.first()}} },
	},
	{
		Name: LuaFence, File: "lua_fence.go", Fenced: true, Correct: true, OwnerChecked: true,
		build: func(s *Lockers) variant { return luaFence{luaLock{s.first()}} },
	},
	{
		Name: RedlockFence, File: "redlock_fence.go", Fenced: true, Correct: true,
		Quorum: true, OwnerChecked: true, ValidityChecked: true, SelfUndoing: true,
		build: func(s *Lockers) variant { return redlockFence{s.redlock()} },
	},
	{
		Name: DBGuard, File: "inventory/db_guard.go", Guard: GuardConditional, Correct: true,
		build: func(*Lockers) variant { return noLock{} },
	},
	{
		Name: DBForUpdate, File: "inventory/for_update.go", Guard: GuardRowLock, Correct: true,
		build: func(*Lockers) variant { return noLock{} },
	},
	{
		Name: RedisStock, File: "inventory/redis_stock.go", Guard: GuardRedisStock, Correct: true,
		build: func(*Lockers) variant { return noLock{} },
	},
	{
		Name: ArticleRedlock, File: "article_redlock.go", Quorum: true,
		build: func(s *Lockers) variant { return newArticleRedlock(s.Clients()) },
	},
	{
		Name: Redsync, File: "redsync.go", Quorum: true, OwnerChecked: true, SelfUndoing: true,
		build: func(s *Lockers) variant { return s.redsync() },
	},
	{
		Name: Attendee, File: "attendee.go",
		build: func(s *Lockers) variant { return attendee{s.first()} },
	},
}

// Ladder lists every rung in teaching order.
func Ladder() []Rung { return slices.Clone(ladder) }

// Names lists every variant name in ladder order.
func Names() []string {
	out := make([]string, len(ladder))
	for i, r := range ladder {
		out[i] = r.Name
	}
	return out
}

// lockless reports whether the rung takes no Redis lock at all: none, and
// the rungs the store guards.
func (r Rung) lockless() bool { return r.Name == None || r.Guard != GuardLock }

// Find is the rung named name.
func Find(name string) (Rung, bool) {
	i := slices.IndexFunc(ladder, func(r Rung) bool { return r.Name == name })
	if i < 0 {
		return Rung{}, false
	}
	return ladder[i], true
}
