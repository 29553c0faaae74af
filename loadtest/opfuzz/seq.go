// Package opfuzz searches sequences of operator actions for a double grant
// of the lock: five real redis-server nodes, lock holders that are separate
// OS processes (each a lock client with its own TTL, on redlock or
// redlock+fence), and a seeded generator of what an operator does to the
// nodes meanwhile (flushes, SWAPDB, eviction, CONFIG RESETSTAT, ACL changes,
// SAVE and a restart from the older file, a restart without data, DEBUG
// RELOAD, SCRIPT FLUSH, CLIENT KILL, a node answering BUSY or LOADING,
// waits, and new holder processes between the actions).
//
// The oracle reads the grants the holders report: two grants of one key to
// different owners whose [acquired, valid-until) intervals overlap are a
// double grant. Between two fenced leases it is one the store survives when
// the later token is the larger; every other one is a failure. A failing
// sequence is shrunk by delta debugging and printed in the form Parse
// reads, to be replayed. A steered search keeps the sequences whose runs
// reached something new (what the holders' lock logged, a grant after a new
// pair of actions, a fenced overlap) and mutates them (see Search).
//
// The sequence is reproducible from the seed; the timing is real (processes,
// sockets, a shared machine), so a replay finds the same race only as often
// as the race is won: replay it several times and count.
package opfuzz

import (
	"flashsale/lock"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Action is one step of a sequence: an operator action on a node, a wait,
// a new holder process, or the end of one (see Ops).
type Action struct {
	// Op names what is done; see Ops.
	Op string
	// Node is the node acted on, 0-based; -1 for a wait or a holder.
	Node int
	// Arg is the op's word: the eviction policy, the ACL rule, "keep" or
	// "wipe" for a restart, "nosave" for a reload, the holder's variant.
	Arg string
	// D is the op's duration: a wait's length, how long a node stays BUSY
	// or SWAPDB stays swapped, a holder's TTL.
	D time.Duration
}

// opSpec says what an op takes after its name: a node, a word from args
// (empty args: none), a duration.
type opSpec struct {
	node bool
	args []string
	dur  bool
}

// Ops is every op a sequence can hold, with what it takes. Two are not an
// operator's: "holder" starts a new holder process (the variant, its TTL),
// and "stop" stops the oldest holder process still running (it releases
// what it holds and exits, as an app instance does in a deploy).
var Ops = map[string]opSpec{
	"wait":        {dur: true},
	"holder":      {args: []string{lock.Redlock, lock.RedlockFence}, dur: true},
	"stop":        {},
	"flushall":    {node: true},
	"flushdb":     {node: true},
	"swapdb":      {node: true, dur: true},
	"evict":       {node: true, args: []string{"volatile-ttl", "volatile-lru", "allkeys-random", "allkeys-lru"}},
	"resetstat":   {node: true},
	"acl":         {node: true, args: []string{"-eval", "+eval", "-info", "+info", "-@all", "+@all"}},
	"save":        {node: true},
	"restart":     {node: true, args: []string{"keep", "wipe"}},
	"reload":      {node: true, args: []string{"save", "nosave"}},
	"scriptflush": {node: true},
	"clientkill":  {node: true},
	"busy":        {node: true, dur: true},
	"loading":     {node: true},
}

// String is the action as Parse reads it: "op [node] [word] [duration]".
func (a Action) String() string {
	spec := Ops[a.Op]
	f := []string{a.Op}
	if spec.node {
		f = append(f, strconv.Itoa(a.Node))
	}
	if len(spec.args) > 0 {
		f = append(f, a.Arg)
	}
	if spec.dur {
		f = append(f, a.D.String())
	}
	return strings.Join(f, " ")
}

// Sequence is the actions of one run, in order.
type Sequence []Action

// String is the sequence as Parse reads it: actions joined by "; ".
func (s Sequence) String() string {
	f := make([]string, len(s))
	for i, a := range s {
		f[i] = a.String()
	}
	return strings.Join(f, "; ")
}

// Parse reads a sequence written as Sequence.String writes it, for nodes
// 0..nodes-1. Actions are separated by ";" or new lines; a "#" starts a
// comment to the end of its line.
func Parse(text string, nodes int) (Sequence, error) {
	var seq Sequence
	for line := range strings.SplitSeq(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for part := range strings.SplitSeq(line, ";") {
			f := strings.Fields(part)
			if len(f) == 0 {
				continue
			}
			a, err := parseAction(f, nodes)
			if err != nil {
				return nil, fmt.Errorf("action %q: %w", strings.TrimSpace(part), err)
			}
			seq = append(seq, a)
		}
	}
	if len(seq) == 0 {
		return nil, fmt.Errorf("no actions in %q", text)
	}
	return seq, nil
}

func parseAction(f []string, nodes int) (Action, error) {
	spec, ok := Ops[f[0]]
	if !ok {
		names := make([]string, 0, len(Ops))
		for n := range Ops {
			names = append(names, n)
		}
		slices.Sort(names)
		return Action{}, fmt.Errorf("unknown op %q: want one of %s", f[0], strings.Join(names, ", "))
	}
	a := Action{Op: f[0], Node: -1}
	rest := f[1:]
	want := 0
	for _, b := range []bool{spec.node, len(spec.args) > 0, spec.dur} {
		if b {
			want++
		}
	}
	if len(rest) != want {
		return a, fmt.Errorf("%s takes %d argument(s), got %d", a.Op, want, len(rest))
	}
	if spec.node {
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 0 || n >= nodes {
			return a, fmt.Errorf("node %q: want 0 to %d", rest[0], nodes-1)
		}
		a.Node, rest = n, rest[1:]
	}
	if len(spec.args) > 0 {
		if !slices.Contains(spec.args, rest[0]) {
			return a, fmt.Errorf("%q: want one of %s", rest[0], strings.Join(spec.args, ", "))
		}
		a.Arg, rest = rest[0], rest[1:]
	}
	if spec.dur {
		d, err := time.ParseDuration(rest[0])
		if err != nil || d <= 0 || d > time.Minute {
			return a, fmt.Errorf("duration %q: want a Go duration between 0 and 1m", rest[0])
		}
		a.D = d
	}
	return a, nil
}
