package main

import (
	"embed"
	"io/fs"
)

// lockFiles holds package lock's files, for the workshop page to show a
// rung's code beside the correct one it differs from. The lock does not
// carry them itself: a team importing it has no use for them. It embeds
// every file, so a new rung's file is there without a line here; the
// tests come along, a hundred-odd kilobytes that nothing serves.
//
//go:embed lock/*.go
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
