package opfuzz

import (
	"slices"
	"time"
)

// The kinds of DoubleGrant.
const (
	// Unsafe is two holders inside their validity that the store cannot
	// tell apart: one lease is unfenced, or the later lease's token is not
	// greater than the earlier's (the store would take the stale write).
	Unsafe = "double-grant"
	// Fenced is two fenced holders inside their validity whose later token
	// is the greater: the store refuses the earlier holder's writes.
	Fenced = "fenced-overlap"
)

// DoubleGrant is two grants of one key to different owners whose
// [Acquired, End) intervals overlap.
type DoubleGrant struct {
	Kind string `json:"kind"`
	// First was acquired before Second.
	First  Grant `json:"first"`
	Second Grant `json:"second"`
	// Overlap is how long both took themselves for the holder.
	Overlap time.Duration `json:"overlap"`
}

// Check returns every double grant among grants, by kind of the pair.
func Check(grants []Grant) []DoubleGrant {
	g := slices.Clone(grants)
	slices.SortFunc(g, func(a, b Grant) int {
		if a.Acquired < b.Acquired {
			return -1
		}
		if a.Acquired > b.Acquired {
			return 1
		}
		return 0
	})
	var out []DoubleGrant
	for i, a := range g {
		for _, b := range g[i+1:] {
			if b.Acquired >= a.End() {
				break // sorted by start: every later grant starts later still
			}
			if a.Key != b.Key || a.Owner == b.Owner {
				continue
			}
			d := DoubleGrant{First: a, Second: b, Kind: Unsafe,
				Overlap: time.Duration(min(a.End(), b.End()) - b.Acquired)}
			if a.Fenced && b.Fenced && b.Token > a.Token {
				d.Kind = Fenced
			}
			out = append(out, d)
		}
	}
	return out
}
