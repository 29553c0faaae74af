package curriculum

// The names of the rungs the workshop teaches beside the production ones
// (lock.None, lock.Lua, lock.Redlock and their fenced rungs), as the
// X-Lock-Variant header carries them. Every one is on lock's ladder; the
// tests hold each lesson to a rung of that name. The store's designs, which
// take no lock, are named by inventory (inventory.Designs).
const (
	SetNXExpire    = "setnx-expire"
	GetDel         = "get-del"
	PlainDel       = "plain-del"
	LuaCheck       = "lua+check"
	ArticleRedlock = "article-redlock"
	Redsync        = "redsync"
	Attendee       = "attendee"
)
