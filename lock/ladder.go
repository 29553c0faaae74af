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
	// Attendee is the rung the workshop's attendees write (attendee.go).
	Attendee = "attendee"
)

// Rung is one variant of the teaching ladder. The ladder is declared here,
// once: the lockers, the variant names, the workshop's side-by-side source
// view and the load runner's matrix all read it.
type Rung struct {
	Name string // as in the X-Lock-Variant header
	// File is the file of this package that implements the rung; Reference
	// is the file of the correct rung it is read beside. A broken rung's file
	// differs from its reference by its flaw; a fenced rung's file holds only
	// what fencing adds to the rung it builds on.
	File, Reference string
	// Fenced rungs issue fencing tokens that the store must check.
	Fenced bool
	build  func(s *Lockers) variant
}

// ladder is the teaching order: no lock, the three broken patterns, the
// correct single-node lock, Redlock, the single-node lock that checks its
// lease before writing, then both locks with fencing tokens; and the rung
// the attendees write.
var ladder = []Rung{
	{Name: None, File: "none.go", Reference: "lua.go", build: func(*Lockers) variant { return noLock{} }},
	{Name: SetNXExpire, File: "setnx_expire.go", Reference: "lua.go", build: func(s *Lockers) variant { return setnxExpire{s.first()} }},
	{Name: GetDel, File: "get_del.go", Reference: "lua.go", build: func(s *Lockers) variant { return getDel{s.first()} }},
	{Name: PlainDel, File: "plain_del.go", Reference: "lua.go", build: func(s *Lockers) variant { return plainDel{s.first()} }},
	{Name: Lua, File: "lua.go", Reference: "lua.go", build: func(s *Lockers) variant { return luaLock{s.first()} }},
	{Name: Redlock, File: "redlock.go", Reference: "redlock.go", build: func(s *Lockers) variant { return s.redlock() }},
	{Name: LuaCheck, File: "lua_check.go", Reference: "lua.go", build: func(s *Lockers) variant { return luaCheck{luaLock{s.first()}} }},
	{Name: LuaFence, File: "lua_fence.go", Reference: "lua.go", Fenced: true,
		build: func(s *Lockers) variant { return luaFence{luaLock{s.first()}} }},
	{Name: RedlockFence, File: "redlock_fence.go", Reference: "redlock.go", Fenced: true,
		build: func(s *Lockers) variant { return redlockFence{s.redlock()} }},
	// Last, past the ladder: the attendees' own single-node rung, read
	// beside the one it should become.
	{Name: Attendee, File: "attendee.go", Reference: "lua.go", build: func(s *Lockers) variant { return attendee{s.first()} }},
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
