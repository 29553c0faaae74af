package main

import (
	"embed"
	"io/fs"
)

// lockFiles holds package lock's files and its ladder's (lock/ladder), for
// the workshop page to show a rung's code beside the correct one it
// differs from. Neither package carries them itself: a team importing the
// lock has no use for them. It embeds every file, so a new rung's file is
// there without a line here; the tests come along, a hundred-odd
// kilobytes that nothing serves.
//
//go:embed lock/*.go lock/ladder/*.go
var lockFiles embed.FS

// lockSource is lockFiles with the lock's files at its root, as the
// workshop page names them.
func lockSource() fs.FS {
	sub, err := fs.Sub(lockFiles, "lock")
	if err != nil {
		panic(err) // "lock" is a valid path: fs.Sub cannot fail on it
	}
	return sub
}
