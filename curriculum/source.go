package curriculum

import (
	"io/fs"
	"strings"
)

// Sources is one file system of every rung's files, named as a lesson's
// File and Reference are: lock's files at its root, the
// inventory's (inventory.Source, the store's designs) under
// "inventory/". Neither package can embed the other's files (embed cannot
// reach outside its directory), so the caller passes both; one that is nil
// has no files.
func Sources(lockFiles, storeFiles fs.FS) fs.FS { return sources{lockFiles, storeFiles} }

// sources is Sources' file system.
type sources struct{ lock, store fs.FS }

// Open opens a file of either package.
func (s sources) Open(name string) (fs.File, error) {
	src := s.lock
	if rest, ok := strings.CutPrefix(name, "inventory/"); ok {
		src, name = s.store, rest
	}
	if src == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return src.Open(name)
}
