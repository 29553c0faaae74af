package opfuzz

import (
	"math/rand/v2"
	"slices"
	"time"
)

// weighted is one op and how often the generator draws it.
type weighted struct {
	op     string
	weight int
}

// draws is the generator's distribution over the action space: operator
// actions each about as often as the others (the ones with two forms, such
// as a restart with or without its data, a little more), and waits and new
// holder processes often, since a loss matters only to a process that meets
// or votes on the node around it, and only once every node that sat out
// votes again.
var draws = []weighted{
	{"holder", 4}, {"stop", 1}, {"wait", 4},
	{"flushall", 1}, {"flushdb", 1}, {"swapdb", 1}, {"evict", 2},
	{"resetstat", 2}, {"acl", 2}, {"save", 2}, {"restart", 2},
	{"reload", 2}, {"scriptflush", 1}, {"clientkill", 1}, {"busy", 1}, {"loading", 1},
}

// Space is what the generator draws from.
type Space struct {
	// Ops are the ops drawn after the opening contender and holder; nil is
	// every op of draws. An op outside draws is never drawn.
	Ops []string
	// TTLs are the holders' TTLs, Waits the waits' lengths.
	TTLs, Waits []time.Duration
}

// DefaultSpace is every op, holders of 1 s and 6 s (mixed TTLs), and waits
// from 100 ms to past the largest TTL plus drift (a node that sits out votes
// again only after that long).
var DefaultSpace = Space{
	TTLs:  []time.Duration{time.Second, 6 * time.Second},
	Waits: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 7 * time.Second},
}

// in reports whether op may be drawn.
func (sp Space) in(op string) bool { return sp.Ops == nil || slices.Contains(sp.Ops, op) }

// largestTTL is the largest TTL a holder of the space uses.
func (sp Space) largestTTL() time.Duration { return slices.Max(sp.TTLs) }

var (
	swapFor  = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}
	busyFor  = []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second}
	aclTaken = []string{"-eval", "-info", "-@all"}
)

// Generate returns the sequence for seed on nodes nodes (at least 3), drawn
// from space: the same seed gives the same sequence. It opens with a holder,
// then draws 6 to 12 actions. Operator actions land on one node of the bare
// quorum (the sequence's focus, one of the nodes the contender leaves; see
// Config.NoContender) seven times in ten, else on any node: a maintenance
// touches one server more than once, and a double grant needs the losses on
// one node that a lease's bare quorum holds. An ACL rule that takes
// something away is followed, three times in four, by the rule that gives
// it back, one to three actions later.
func Generate(seed int64, nodes int, space Space) Sequence {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	focus := r.IntN(nodes - contenderNodes)
	seq := Sequence{holderAction(r, space)}
	type pending struct {
		at int
		a  Action
	}
	var later []pending
	total := 0
	for n := 6 + r.IntN(7); total < n; total++ {
		for i := 0; i < len(later); i++ {
			if later[i].at == total {
				seq = append(seq, later[i].a)
				later = append(later[:i], later[i+1:]...)
				i--
			}
		}
		a := draw(r, focus, nodes, space)
		if a.Op == "acl" && r.IntN(4) < 3 {
			back := a
			back.Arg = "+" + a.Arg[1:]
			later = append(later, pending{at: total + 1 + r.IntN(3), a: back})
		}
		seq = append(seq, a)
	}
	for _, p := range later {
		seq = append(seq, p.a)
	}
	return seq
}

// draw draws one action.
func draw(r *rand.Rand, focus, nodes int, space Space) Action {
	sum := 0
	for _, w := range draws {
		if space.in(w.op) {
			sum += w.weight
		}
	}
	if sum == 0 {
		return Action{Op: "wait", Node: -1, D: pickOne(r, space.Waits)}
	}
	pick := r.IntN(sum)
	op := ""
	for _, w := range draws {
		if !space.in(w.op) {
			continue
		}
		if pick < w.weight {
			op = w.op
			break
		}
		pick -= w.weight
	}
	switch op {
	case "holder":
		return holderAction(r, space)
	case "wait":
		return Action{Op: op, Node: -1, D: pickOne(r, space.Waits)}
	case "stop":
		return Action{Op: op, Node: -1}
	}
	a := Action{Op: op, Node: focus}
	if r.IntN(10) >= 7 {
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
