package lock_test

import (
	"testing"

	"flashsale/lock"
	"flashsale/lock/ladder"
)

// The ladder describes the library's rungs to the workshop (the matrix,
// the pages) in its own entries; the Lockers run them by lock's table. The
// two say the same of every library rung, and the ladder lists them all.
func TestLadderDescribesTheLibraryAsItRuns(t *testing.T) {
	lib := lock.LibraryTraits()
	if len(lib) == 0 {
		t.Fatal("the library declares no rungs")
	}
	for name, want := range lib {
		r, ok := ladder.Find(name)
		if !ok {
			t.Errorf("%s: the library runs it, the ladder does not list it", name)
			continue
		}
		got := lock.Traits{Quorum: r.Quorum, OwnerChecked: r.OwnerChecked, ValidityChecked: r.ValidityChecked, Fenced: r.Fenced, SelfUndoing: r.SelfUndoing}
		if got != want {
			t.Errorf("%s: the ladder says %+v, the library runs %+v", name, got, want)
		}
	}
}
