package lock

import "slices"

// The names of the rungs a team may run in production: no lock, the
// single-node lock and Redlock, each plain or with fencing tokens. The other
// rungs (the broken patterns, the store-guarded designs, the peers read
// beside Redlock) are on the ladder under their names too (Names); the
// workshop's material names them.
const (
	None         = "none"
	Lua          = "lua"
	Redlock      = "redlock"
	LuaFence     = "lua+fence"
	RedlockFence = "redlock+fence"
)

// The teaching rungs' names, as the X-Lock-Variant header carries them.
const (
	setNXExpireName = "setnx-expire"
	getDelName      = "get-del"
	plainDelName    = "plain-del"
	luaCheckName    = "lua+check"
	articleName     = "article-redlock"
	redsyncName     = "redsync"
	attendeeName    = "attendee"
	dbGuardName     = "db-guard"
	forUpdateName   = "db-for-update"
	redisStockName  = "redis-stock"
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
	// StoreGuarded rungs take no Redis lock at all (like none): a guard on
	// the store side keeps the sale correct, which package inventory picks
	// by the rung's name.
	StoreGuarded bool
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
		Name: setNXExpireName, File: "setnx_expire.go",
		build: func(s *Lockers) variant { return setnxExpire{s.first()} },
	},
	{
		Name: getDelName, File: "get_del.go",
		build: func(s *Lockers) variant { return getDel{s.first()} },
	},
	{
		Name: plainDelName, File: "plain_del.go",
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
		Name: luaCheckName, File: "lua_check.go", OwnerChecked: true,
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
		Name: dbGuardName, File: "inventory/db_guard.go", StoreGuarded: true, Correct: true,
		build: func(*Lockers) variant { return noLock{} },
	},
	{
		Name: forUpdateName, File: "inventory/for_update.go", StoreGuarded: true, Correct: true,
		build: func(*Lockers) variant { return noLock{} },
	},
	{
		Name: redisStockName, File: "inventory/redis_stock.go", StoreGuarded: true, Correct: true,
		build: func(*Lockers) variant { return noLock{} },
	},
	{
		Name: articleName, File: "article_redlock.go", Quorum: true,
		build: func(s *Lockers) variant { return newArticleRedlock(s.Clients()) },
	},
	{
		Name: redsyncName, File: "redsync.go", Quorum: true, OwnerChecked: true, SelfUndoing: true,
		build: func(s *Lockers) variant { return s.redsync() },
	},
	{
		Name: attendeeName, File: "attendee.go",
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
func (r Rung) lockless() bool { return r.Name == None || r.StoreGuarded }

// Find is the rung named name.
func Find(name string) (Rung, bool) {
	i := slices.IndexFunc(ladder, func(r Rung) bool { return r.Name == name })
	if i < 0 {
		return Rung{}, false
	}
	return ladder[i], true
}
