// Package ladder is the workshop's ladder of lock variants: the broken
// patterns the articles warn about, the Redlocks read beside ours, and the
// rung the attendees write, each in a short file of its own that opens
// with what it does and marks the line where it breaks // BROKEN:. With
// registers them with a lock.Client beside the library's own rungs (lock's
// Lua, Redlock and their fenced forms); Rungs says, for every rung in
// teaching order, what the workshop needs to know of it: its file, whether
// it is correct, and the traits its lessons compare.
package ladder

import (
	"slices"

	"flashsale/lock"

	"github.com/redis/go-redis/v9"
)

// Rung is one rung of the ladder as the workshop knows it.
type Rung struct {
	Name string // as in the X-Lock-Variant header
	// File is the file that implements it, from package lock's directory:
	// lock's own ("lua.go") or this package's ("ladder/get_del.go").
	File string
	// Correct rungs keep the sale right under the faults their design
	// answers; the production mode allows only these.
	Correct bool
	// Quorum rungs ask a majority of the nodes (Redlock's); the others ask
	// the first node, or none at all.
	Quorum bool
	// OwnerChecked rungs give back (and extend) only a key that still
	// carries the holder's value, in one atomic step.
	OwnerChecked bool
	// ValidityChecked rungs measure how long a grant stays exclusive (TTL −
	// elapsed − drift) and hand a lease over only while it does.
	ValidityChecked bool
	// Fenced rungs issue fencing tokens that the store must check.
	Fenced bool
	// SelfUndoing rungs delete their value on every node after a failed try
	// themselves.
	SelfUndoing bool

	build func(_, _ []*redis.Client, _ lock.Protocol) lock.Protocol // nil: one of the library's rungs
}

// ladder is the teaching order: no lock, the three broken patterns, the
// correct single-node lock, Redlock, the single-node lock that checks its
// lease before writing, then both locks with fencing tokens; then the
// Redlock an article teaches and the one a library ships, read
// beside ours; last, the rung the attendees write.
var ladder = []Rung{
	{Name: None, File: "ladder/none.go", build: func(_, _ []*redis.Client, _ lock.Protocol) lock.Protocol { return noLock{} }},
	{Name: SetNXExpire, File: "ladder/setnx_expire.go", build: func(c, _ []*redis.Client, _ lock.Protocol) lock.Protocol { return setnxExpire{c[0]} }},
	{Name: GetDel, File: "ladder/get_del.go", build: func(c, _ []*redis.Client, lua lock.Protocol) lock.Protocol { return getDel{lua, c[0]} }},
	{Name: PlainDel, File: "ladder/plain_del.go", build: func(c, _ []*redis.Client, lua lock.Protocol) lock.Protocol { return plainDel{lua, c[0]} }},
	{Name: lock.Lua, File: "lua.go", Correct: true, OwnerChecked: true},
	{Name: lock.Redlock, File: "redlock.go", Correct: true, Quorum: true, OwnerChecked: true, ValidityChecked: true, SelfUndoing: true},
	{
		Name: LuaCheck, File: "ladder/lua_check.go", OwnerChecked: true,
		build: func(c, _ []*redis.Client, lua lock.Protocol) lock.Protocol { return luaCheck{lua, c[0]} },
	},
	{Name: lock.LuaFence, File: "lua_fence.go", Fenced: true, Correct: true, OwnerChecked: true},
	{
		Name: lock.RedlockFence, File: "redlock_fence.go", Fenced: true, Correct: true,
		Quorum: true, OwnerChecked: true, ValidityChecked: true, SelfUndoing: true,
	},
	{
		Name: ArticleRedlock, File: "ladder/article_redlock.go", Quorum: true,
		build: func(c, _ []*redis.Client, _ lock.Protocol) lock.Protocol { return newArticleRedlock(c) },
	},
	{
		Name: Redsync, File: "ladder/redsync.go", Quorum: true, OwnerChecked: true, SelfUndoing: true,
		build: func(_, plain []*redis.Client, _ lock.Protocol) lock.Protocol { return newRedsync(plain) },
	},
	{Name: Attendee, File: "ladder/attendee.go", build: func(c, _ []*redis.Client, lua lock.Protocol) lock.Protocol { return attendee{lua, c[0]} }},
}

// Rungs lists every rung in teaching order.
func Rungs() []Rung { return slices.Clone(ladder) }

// Names lists every rung's name in teaching order.
func Names() []string {
	out := make([]string, len(ladder))
	for i, r := range ladder {
		out[i] = r.Name
	}
	return out
}

// Find is the rung named name.
func Find(name string) (Rung, bool) {
	i := slices.IndexFunc(ladder, func(r Rung) bool { return r.Name == name })
	if i < 0 {
		return Rung{}, false
	}
	return ladder[i], true
}

// With is o with every rung of the ladder that the library does not run
// itself registered, so a Client made of it has a Locker for each name.
func With(o lock.Options) lock.Options {
	o.Rungs = slices.Clone(o.Rungs)
	for _, r := range ladder {
		if r.build != nil {
			o.Rungs = append(o.Rungs, lock.Rung{
				Name: r.Name, Quorum: r.Quorum, OwnerChecked: r.OwnerChecked, SelfUndoing: r.SelfUndoing, New: r.build,
			})
		}
	}
	return o
}

// Unlocked is a rung named name that takes no lock at all, as None: how the
// store's designs, which keep a sale right without a Redis lock, run under
// their own names.
func Unlocked(name string) lock.Rung {
	return lock.Rung{Name: name, New: func(_, _ []*redis.Client, _ lock.Protocol) lock.Protocol { return noLock{} }}
}
