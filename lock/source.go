package lock

import "embed"

// Source holds the variant files themselves, for the workshop page to show a
// variant's code beside the correct one it differs from.
//
//go:embed none.go setnx_expire.go get_del.go plain_del.go lua.go redlock.go single.go scripts.go
var Source embed.FS

// SourceFile names the file in Source that implements a variant.
func SourceFile(variant string) (string, bool) {
	f, ok := map[string]string{
		None: "none.go", SetNXExpire: "setnx_expire.go", GetDel: "get_del.go", PlainDel: "plain_del.go",
		Lua: "lua.go", LuaFence: "lua.go", Redlock: "redlock.go", RedlockFence: "redlock.go",
	}[variant]
	return f, ok
}
