package opfuzz

import (
	"flashsale/lock"
	"math/rand/v2"
	"slices"
)

// maxMutated bounds a mutated sequence's length.
const maxMutated = 24

// Mutate returns a variation of parent for seed, drawn from space: one to
// three of these, each drawn at random: insert an operator action (of a
// kind the parent holds two times in three, on the node the parent acts
// on most four times in five), insert a holder process or a wait, drop an
// action, change one action's node, word or duration, copy a run of up to
// three actions elsewhere, swap two neighbours, or make every holder plain
// redlock (a fenced overlap is a double grant the fence caught; without
// the fence it is one). One time in eight it returns parent as it is: the
// timing is real, and a run that passed once may fail the next. The same
// seed and parent give the same sequence.
func Mutate(parent Sequence, seed int64, nodes int, space Space) Sequence {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x6a09e667f3bcc909))
	seq := slices.Clone(parent)
	if r.IntN(8) == 0 {
		return seq
	}
	focus, kinds := actedOn(seq, nodes)
	for range 1 + r.IntN(3) {
		at := 1 + r.IntN(len(seq)) // after the opening holder
		switch r.IntN(9) {
		case 0, 1:
			op := ""
			if len(kinds) > 0 && r.IntN(3) < 2 {
				op = pickOne(r, kinds)
			} else if all := drawable(space); len(all) > 0 {
				op = pickOne(r, all)
			}
			if op != "" {
				seq = slices.Insert(seq, at, operatorAction(r, op, focus, nodes))
			}
		case 2:
			if space.in("holder") {
				seq = slices.Insert(seq, at, holderAction(r, space, 0))
			}
		case 3:
			if space.in("wait") {
				seq = slices.Insert(seq, at, Action{Op: "wait", Node: -1, D: pickOne(r, space.Waits)})
			}
		case 4:
			if len(seq) > 2 {
				i := r.IntN(len(seq))
				seq = slices.Delete(seq, i, i+1)
			}
		case 5:
			i := r.IntN(len(seq))
			seq[i] = tweak(r, seq[i], nodes, space)
		case 6:
			i := r.IntN(len(seq))
			j := min(len(seq), i+1+r.IntN(3))
			seq = slices.Insert(seq, min(at, len(seq)), slices.Clone(seq[i:j])...)
		case 7:
			if len(seq) > 2 {
				i := 1 + r.IntN(len(seq)-1)
				seq[i-1], seq[i] = seq[i], seq[i-1]
			}
		case 8:
			for i, a := range seq {
				if a.Op == "holder" {
					seq[i].Arg = lock.Redlock
				}
			}
		}
	}
	if len(seq) > maxMutated {
		seq = seq[:maxMutated]
	}
	return seq
}

// actedOn is the node the operator actions of seq act on most (the lowest
// such node; 0 for none) and the kinds of operator action seq holds.
func actedOn(seq Sequence, nodes int) (int, []string) {
	count := make([]int, nodes)
	var kinds []string
	for _, a := range seq {
		if a.Node < 0 || a.Node >= nodes {
			continue
		}
		count[a.Node]++
		if !slices.Contains(kinds, a.Op) {
			kinds = append(kinds, a.Op)
		}
	}
	return slices.Index(count, slices.Max(count)), kinds
}

// drawable is every operator op space holds, in operatorOps' order.
func drawable(space Space) []string {
	var out []string
	for _, w := range operatorOps {
		if space.in(w.op) {
			out = append(out, w.op)
		}
	}
	return out
}

// tweak changes one of a's node, word or duration.
func tweak(r *rand.Rand, a Action, nodes int, space Space) Action {
	spec := Ops[a.Op]
	switch {
	case a.Op == "holder":
		if r.IntN(2) == 0 {
			a.D = pickOne(r, space.TTLs)
		} else {
			a.Arg = pickOne(r, spec.args)
		}
	case a.Op == "wait":
		a.D = pickOne(r, space.Waits)
	case len(spec.args) > 0 && r.IntN(2) == 0:
		a.Arg = pickOne(r, spec.args)
	case spec.node:
		a.Node = r.IntN(nodes)
	}
	return a
}
