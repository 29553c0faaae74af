package lock

import "embed"

// Source holds the variant files themselves (and what they share), for the
// workshop page to show a rung's code beside the correct one it differs from.
//
//go:embed lock.go retry.go fast.go none.go setnx_expire.go get_del.go plain_del.go lua.go redlock.go lua_check.go lease_check.go lua_fence.go redlock_fence.go restart.go plain_extend.go errors.go scripts.go quorum.go instance.go attendee.go
var Source embed.FS

// SourceFile names the file that implements a variant: a file of Source,
// or, for a rung without a lock, "inventory/<file>" (inventory.Source).
func SourceFile(variant string) (string, bool) {
	for _, r := range ladder {
		if r.Name == variant {
			return r.File, true
		}
	}
	return "", false
}
