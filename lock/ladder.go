package lock

import "slices"

// The names of the variants a team may run in production: no lock, the
// single-node lock and Redlock, each plain or with fencing tokens. The other
// variants (the broken patterns, the store-guarded designs, the peers read
// beside Redlock) are on the ladder under their names too (Names); the
// workshop's material names them.
const (
	None         = "none"
	Lua          = "lua"
	Redlock      = "redlock"
	LuaFence     = "lua+fence"
	RedlockFence = "redlock+fence"
)

// The teaching variants' names, as the X-Lock-Variant header carries them.
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

// ladder is the teaching order: no lock, the three broken patterns, the
// correct single-node lock, Redlock, the single-node lock that checks its
// lease before writing, then both locks with fencing tokens; then the
// designs that need no Redis lock at all, where the store is the guard;
// then the Redlock an article teaches and the one a library ships, read
// beside ours; last, the rung the attendees write.
var ladder = []Variant{
	{
		Name: None, File: "none.go",
		build: func(parts) protocol { return noLock{} },
	},
	{
		Name: setNXExpireName, File: "setnx_expire.go",
		build: func(p parts) protocol { return setnxExpire{p.first} },
	},
	{
		Name: getDelName, File: "get_del.go",
		build: func(p parts) protocol { return getDel{p.first} },
	},
	{
		Name: plainDelName, File: "plain_del.go",
		build: func(p parts) protocol { return plainDel{p.first} },
	},
	{
		Name: Lua, File: "lua.go", Correct: true, OwnerChecked: true,
		build: func(p parts) protocol { return luaLock{p.first} },
	},
	{
		Name: Redlock, File: "redlock.go", Correct: true,
		Quorum: true, OwnerChecked: true, ValidityChecked: true, SelfUndoing: true,
		build: func(p parts) protocol { return redlock{newVoters(p.nodes, p.cfg)} },
	},
	{
		Name: luaCheckName, File: "lua_check.go", OwnerChecked: true,
		build: func(p parts) protocol { return luaCheck{luaLock{p.first}} },
	},
	{
		Name: LuaFence, File: "lua_fence.go", Fenced: true, Correct: true, OwnerChecked: true,
		build: func(p parts) protocol { return luaFence{luaLock{p.first}} },
	},
	{
		Name: RedlockFence, File: "redlock_fence.go", Fenced: true, Correct: true,
		Quorum: true, OwnerChecked: true, ValidityChecked: true, SelfUndoing: true,
		build: func(p parts) protocol { return redlockFence{redlock{newVoters(p.nodes, p.cfg)}} },
	},
	{
		Name: dbGuardName, File: "inventory/db_guard.go", StoreGuarded: true, Correct: true,
		build: func(parts) protocol { return noLock{} },
	},
	{
		Name: forUpdateName, File: "inventory/for_update.go", StoreGuarded: true, Correct: true,
		build: func(parts) protocol { return noLock{} },
	},
	{
		Name: redisStockName, File: "inventory/redis_stock.go", StoreGuarded: true, Correct: true,
		build: func(parts) protocol { return noLock{} },
	},
	{
		Name: articleName, File: "article_redlock.go", Quorum: true,
		build: func(p parts) protocol { return newArticleRedlock(p.clients) },
	},
	{
		Name: redsyncName, File: "redsync.go", Quorum: true, OwnerChecked: true, SelfUndoing: true,
		build: func(p parts) protocol { return newRedsync(p.nodes) },
	},
	{
		Name: attendeeName, File: "attendee.go",
		build: func(p parts) protocol { return attendee{p.first} },
	},
}

// Ladder lists every variant in teaching order.
func Ladder() []Variant { return slices.Clone(ladder) }

// Names lists every variant name in ladder order.
func Names() []string {
	out := make([]string, len(ladder))
	for i, r := range ladder {
		out[i] = r.Name
	}
	return out
}

// Find is the variant named name.
func Find(name string) (Variant, bool) {
	i := slices.IndexFunc(ladder, func(r Variant) bool { return r.Name == name })
	if i < 0 {
		return Variant{}, false
	}
	return ladder[i], true
}

// lockless reports whether the variant takes no Redis lock at all: none, and
// the variants the store guards.
func (r Variant) lockless() bool { return r.Name == None || r.StoreGuarded }
