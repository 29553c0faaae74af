package inventory

import (
	"testing"

	"flashsale/lock/ladder"
)

// The store guards and lock's store-guarded rungs are the same set: a rung
// the store guards without a guard here would sell under no guard at all.
func TestStoreGuardsAreTheStoreGuardedRungs(t *testing.T) {
	for name := range storeGuards {
		if r, ok := ladder.Find(name); !ok || !r.StoreGuarded {
			t.Errorf("%s has a store guard but is not a store-guarded rung of lock's ladder", name)
		}
	}
	for _, name := range ladder.Names() {
		r, _ := ladder.Find(name)
		if _, ok := storeGuards[name]; r.StoreGuarded && !ok {
			t.Errorf("%s is store-guarded on lock's ladder but has no guard here", name)
		}
	}
}
