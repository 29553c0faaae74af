package opfuzz

import (
	"math/rand/v2"
	"slices"
	"time"
)

// operatorOps are the operator's actions the generator draws, with their
// weights: the ones whose pairs slipped past the operator ledger before
// (RESETSTAT, ACL changes, SAVE and a restart from the older file, DEBUG
// RELOAD, CONFIG SET there and back, BUSY and LOADING) twice as often as
// the ones the lock's tests take one at a time.
var operatorOps = []struct {
	op     string
	weight int
}{
	{"flushall", 1}, {"flushdb", 1}, {"swapdb", 1}, {"scriptflush", 1}, {"clientkill", 1},
	{"evict", 2}, {"resetstat", 2}, {"acl", 2}, {"save", 2}, {"restart", 2},
	{"reload", 2}, {"busy", 2}, {"loading", 2},
}

// Space is what the generator draws from.
type Space struct {
	// Ops are the ops that may be drawn; nil is every op.
	Ops []string
	// TTLs are the holders' TTLs, Waits the waits' lengths.
	TTLs, Waits []time.Duration
}

// DefaultSpace is every op, holders of 1 s and 6 s (mixed TTLs), and waits
// from 100 ms to past the largest TTL plus drift, the latter half the time:
// a node that saw an operator's command sits out that long, and a loss
// there grants nothing twice unless a lease counted its vote first.
var DefaultSpace = Space{
	TTLs:  []time.Duration{time.Second, 6 * time.Second},
	Waits: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 7 * time.Second, 7 * time.Second, 7 * time.Second},
}

// in reports whether op may be drawn.
func (sp Space) in(op string) bool { return sp.Ops == nil || slices.Contains(sp.Ops, op) }

var (
	swapFor  = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}
	busyFor  = []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second}
	aclTaken = []string{"-eval", "-info", "-@all"}
)

// Generate returns the sequence for seed on nodes nodes (at least 3), drawn
// from space: the same seed gives the same sequence.
//
// A sequence opens with a holder process and holds 3 to 7 operator actions.
// Between two of them processes come and go and time passes: a new holder
// process starts one time in two (it meets the nodes as they are then), the
// oldest one stops one time in two, and a wait runs one time in two.
//
// The operator actions follow swarm testing: each sequence draws from a
// few kinds only (two of the space's six times in ten, three three times,
// one once), so that a sequence holds
// the same few actions several times and in several orders, as an
// operator's routine does (a monitoring job's RESETSTAT, a backup's SAVE, a
// CONFIG SET there and back), instead of one of everything. They land on
// one node of the bare quorum (the sequence's focus; see
// Config.NoContender) four times in five, else on any node: a double grant
// needs the losses on one node that a lease's bare quorum holds. An ACL
// rule that takes something away is followed, three times in four, by the
// rule that gives it back, one to three actions later.
func Generate(seed int64, nodes int, space Space) Sequence {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	focus := r.IntN(nodes - contenderNodes)
	kinds := drawKinds(r, space)
	seq := Sequence{}
	if space.in("holder") {
		seq = append(seq, holderAction(r, space))
	}
	type pending struct {
		at int
		a  Action
	}
	var later []pending
	n := 3 + r.IntN(5)
	for i := range n {
		if i > 0 {
			seq = append(seq, between(r, space)...)
		}
		for j := 0; j < len(later); j++ {
			if later[j].at == i {
				seq = append(seq, later[j].a)
				later = append(later[:j], later[j+1:]...)
				j--
			}
		}
		if len(kinds) == 0 {
			continue
		}
		a := operatorAction(r, pickOne(r, kinds), focus, nodes)
		if a.Op == "acl" && r.IntN(4) < 3 {
			back := a
			back.Arg = "+" + a.Arg[1:]
			later = append(later, pending{at: i + 1 + r.IntN(3), a: back})
		}
		seq = append(seq, a)
	}
	for _, p := range later {
		seq = append(seq, p.a)
	}
	if space.in("holder") && r.IntN(2) == 0 {
		seq = append(seq, holderAction(r, space))
	}
	return seq
}

// drawKinds draws the kinds of operator action of one sequence, by weight
// and without repeats.
func drawKinds(r *rand.Rand, space Space) []string {
	k := 2
	switch n := r.IntN(10); {
	case n == 0:
		k = 1
	case n >= 7:
		k = 3
	}
	var kinds []string
	for len(kinds) < k {
		sum := 0
		for _, w := range operatorOps {
			if space.in(w.op) && !slices.Contains(kinds, w.op) {
				sum += w.weight
			}
		}
		if sum == 0 {
			break
		}
		pick := r.IntN(sum)
		for _, w := range operatorOps {
			if !space.in(w.op) || slices.Contains(kinds, w.op) {
				continue
			}
			if pick < w.weight {
				kinds = append(kinds, w.op)
				break
			}
			pick -= w.weight
		}
	}
	return kinds
}

// between is what happens between two operator actions: a process stops,
// a new one starts, time passes; each may or may not.
func between(r *rand.Rand, space Space) []Action {
	var out []Action
	if space.in("stop") && r.IntN(2) == 0 {
		out = append(out, Action{Op: "stop", Node: -1})
	}
	if space.in("holder") && r.IntN(2) == 0 {
		out = append(out, holderAction(r, space))
	}
	if space.in("wait") && r.IntN(2) == 0 {
		out = append(out, Action{Op: "wait", Node: -1, D: pickOne(r, space.Waits)})
	}
	return out
}

// operatorAction is one action of kind op, mostly on focus.
func operatorAction(r *rand.Rand, op string, focus, nodes int) Action {
	a := Action{Op: op, Node: focus}
	if r.IntN(5) == 0 {
		a.Node = r.IntN(nodes)
	}
	switch op {
	case "acl":
		a.Arg = pickOne(r, aclTaken)
	case "swapdb":
		a.D = pickOne(r, swapFor)
	case "busy":
		a.D = pickOne(r, busyFor)
	default:
		if args := Ops[op].args; len(args) > 0 {
			a.Arg = pickOne(r, args)
		}
	}
	return a
}

func holderAction(r *rand.Rand, space Space) Action {
	return Action{Op: "holder", Node: -1, Arg: pickOne(r, Ops["holder"].args), D: pickOne(r, space.TTLs)}
}

func pickOne[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }
