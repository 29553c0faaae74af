package opfuzz

import (
	"math/rand/v2"
	"slices"
	"time"
)

// operatorOps are the operator's actions the generator draws, with their
// weights and their part. A "setup" changes what a process that meets the
// node next reads, or what a later restore brings back (an ACL that takes
// a command away, a RESETSTAT, a SAVE, a node answering BUSY or LOADING, a
// killed connection); a "loss" can take a lease's key from the node (a
// flush, SWAPDB, an eviction, a restart, a reload, a SCRIPT FLUSH of what
// the lock's checks run). The ones whose pairs slipped past the operator
// ledger before weigh twice the ones the lock's tests take one at a time.
var operatorOps = []struct {
	op     string
	weight int
	loss   bool
}{
	{"acl", 2, false}, {"resetstat", 2, false}, {"save", 2, false}, {"busy", 2, false},
	{"loading", 2, false}, {"clientkill", 1, false},
	{"flushall", 1, true}, {"flushdb", 1, true}, {"swapdb", 1, true}, {"scriptflush", 1, true},
	{"evict", 2, true}, {"restart", 2, true}, {"reload", 2, true},
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
// A sequence opens with a holder process (of the space's shortest TTL two
// times in three: a process of one TTL meets the fresh nodes, processes of
// others come later, as in a deploy that changes the TTL) and holds 3 to 7
// operator actions. Between two of them processes come and go and time
// passes: a new holder process starts two times in three (it meets the
// nodes as the action before left them), the oldest one stops one time in
// three, and a wait runs one time in two; after the last action a new
// process starts three times in four.
//
// The operator actions follow swarm testing: each sequence draws from a
// few kinds only, so that it holds the same few actions several times and
// in several orders, as an operator's routine does (a monitoring job's
// RESETSTAT, a backup's SAVE, a CONFIG SET there and back), instead of one
// of everything. The kinds are one setup and one loss (see operatorOps)
// six times in ten, a third kind of either part three times, one kind
// once (and a SAVE with a loss that loads the node's file, one time in
// two); the actions take the two parts in turn, setup first, each four
// times in five: a double grant takes a process that met a node as a setup
// left it and a loss there after. Before a loss, one time in three while
// two or more processes run, the oldest stops (the lease passes to one
// that met the node later: which process holds the lease a loss takes is
// part of the space); two times in three, the longest wait: a sit-out's
// length of quiet, after which a lease counts the node's vote (a loss in a
// sit-out grants nothing twice). The actions land
// on one node of the bare quorum (the sequence's focus; see
// Config.NoContender) nine times in ten, else on any node: a double grant
// needs the losses on one node that a lease's bare quorum holds. An ACL
// rule that takes something away is followed, three times in four, by the
// rule that gives it back, one to three actions later.
func Generate(seed int64, nodes int, space Space) Sequence {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	focus := r.IntN(nodes - contenderNodes)
	setups, losses := drawKinds(r, space)
	seq := Sequence{}
	var ttl time.Duration // the last holder's
	if space.in("holder") {
		h := holderAction(r, space, 0)
		if r.IntN(3) < 2 {
			h.D = slices.Min(space.TTLs)
		}
		seq = append(seq, h)
		ttl = h.D
	}
	type pending struct {
		at int
		a  Action
	}
	var later []pending
	n := 3 + r.IntN(5)
	for i := range n {
		if i > 0 {
			seq = append(seq, between(r, space, &ttl)...)
		}
		for j := 0; j < len(later); j++ {
			if later[j].at == i {
				seq = append(seq, later[j].a)
				later = append(later[:j], later[j+1:]...)
				j--
			}
		}
		kinds := setups
		if len(kinds) == 0 || (len(losses) > 0 && (r.IntN(5) == 0) == (i%2 == 0)) {
			kinds = losses
		}
		if len(kinds) == 0 {
			continue
		}
		a := operatorAction(r, pickOne(r, kinds), focus, nodes)
		if isLoss(a.Op) && space.in("stop") && running(seq) > 1 && r.IntN(3) == 0 {
			seq = append(seq, Action{Op: "stop", Node: -1})
		}
		if isLoss(a.Op) && space.in("wait") && len(space.Waits) > 0 && r.IntN(3) < 2 {
			if len(seq) == 0 || seq[len(seq)-1].Op != "wait" || seq[len(seq)-1].D < slices.Max(space.Waits) {
				seq = append(seq, Action{Op: "wait", Node: -1, D: slices.Max(space.Waits)})
			}
		}
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
	if space.in("holder") && r.IntN(4) < 3 {
		seq = append(seq, holderAction(r, space, ttl))
	}
	return seq
}

// running is how many holder processes seq leaves running.
func running(seq Sequence) int {
	n := 0
	for _, a := range seq {
		switch {
		case a.Op == "holder":
			n++
		case a.Op == "stop" && n > 0:
			n--
		}
	}
	return n
}

// isLoss reports whether op is a loss (see operatorOps).
func isLoss(op string) bool {
	for _, w := range operatorOps {
		if w.op == op {
			return w.loss
		}
	}
	return false
}

// drawKinds draws the kinds of operator action of one sequence, by weight
// and without repeats: the setups and the losses.
func drawKinds(r *rand.Rand, space Space) (setups, losses []string) {
	draw := func(loss bool) {
		sum := 0
		for _, w := range operatorOps {
			if w.loss == loss && space.in(w.op) && !slices.Contains(setups, w.op) && !slices.Contains(losses, w.op) {
				sum += w.weight
			}
		}
		if sum == 0 {
			return
		}
		pick := r.IntN(sum)
		for _, w := range operatorOps {
			if w.loss != loss || !space.in(w.op) || slices.Contains(setups, w.op) || slices.Contains(losses, w.op) {
				continue
			}
			if pick < w.weight {
				if loss {
					losses = append(losses, w.op)
				} else {
					setups = append(setups, w.op)
				}
				return
			}
			pick -= w.weight
		}
	}
	switch n := r.IntN(10); {
	case n == 0:
		draw(r.IntN(2) == 0)
	case n >= 7:
		draw(false)
		draw(true)
		draw(r.IntN(2) == 0)
	default:
		draw(false)
		draw(true)
	}
	if len(setups)+len(losses) == 0 { // a space of one part only
		draw(true)
		draw(false)
	}
	// A loss that brings back the node's own file (a restart that keeps
	// it, a reload that does not save first) loads whatever the last SAVE
	// wrote: without a SAVE in the sequence it is the node's first file,
	// with one, an older state of the lock's own records. The latter is
	// drawn one time in two.
	if restoresFile(losses) && space.in("save") && !slices.Contains(setups, "save") && r.IntN(2) == 0 {
		setups = append(setups, "save")
	}
	return setups, losses
}

// restoresFile reports whether losses hold one that can load the node's
// file as an earlier SAVE left it.
func restoresFile(losses []string) bool {
	return slices.Contains(losses, "restart") || slices.Contains(losses, "reload")
}

// between is what happens between two operator actions: a process stops,
// a new one starts, time passes; each may or may not.
func between(r *rand.Rand, space Space, ttl *time.Duration) []Action {
	var out []Action
	if space.in("stop") && r.IntN(3) == 0 {
		out = append(out, Action{Op: "stop", Node: -1})
	}
	if space.in("holder") && r.IntN(3) < 2 {
		h := holderAction(r, space, *ttl)
		*ttl = h.D
		out = append(out, h)
	}
	if space.in("wait") && r.IntN(2) == 0 {
		out = append(out, Action{Op: "wait", Node: -1, D: pickOne(r, space.Waits)})
	}
	return out
}

// operatorAction is one action of kind op, mostly on focus.
func operatorAction(r *rand.Rand, op string, focus, nodes int) Action {
	a := Action{Op: op, Node: focus}
	if r.IntN(10) == 0 {
		a.Node = r.IntN(nodes)
	}
	switch op {
	case "acl":
		a.Arg = pickOne(r, aclTaken)
	case "swapdb":
		a.D = pickOne(r, swapFor)
	case "busy":
		a.D = pickOne(r, busyFor)
	case "reload":
		// A reload that saves first brings back what the node holds; one
		// that does not, an older file: the loss, three times in four.
		a.Arg = "nosave"
		if r.IntN(4) == 0 {
			a.Arg = "save"
		}
	default:
		if args := Ops[op].args; len(args) > 0 {
			a.Arg = pickOne(r, args)
		}
	}
	return a
}

// holderAction is a new holder process. For mixed TTLs, one drawn with
// last's TTL (the holder's before it; 0 for none) is drawn again, from the
// other TTLs, three times in four.
func holderAction(r *rand.Rand, space Space, last time.Duration) Action {
	h := Action{Op: "holder", Node: -1, Arg: pickOne(r, Ops["holder"].args), D: pickOne(r, space.TTLs)}
	if h.D == last && r.IntN(4) < 3 {
		others := slices.DeleteFunc(slices.Clone(space.TTLs), func(d time.Duration) bool { return d == last })
		if len(others) > 0 {
			h.D = pickOne(r, others)
		}
	}
	return h
}

func pickOne[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }
