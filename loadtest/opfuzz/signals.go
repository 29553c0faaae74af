package opfuzz

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A signal is one thing a run reached that the search steers by: a line
// the holders' lock logged (a meeting refused, a node sat out, flushed
// under an open connection, re-seeded), said by what, on a node the
// operator acted on or not, after which action there, by a holder of which
// TTL; a lease granted after an operator action to a process started
// after another (or the same); a fenced overlap (the
// double grant the store survives). A run that reaches a signal no run
// before it reached is kept, and mutated (see Search): the search goes
// further where the lock did something new, as a coverage-guided fuzzer
// goes where the code took a new branch. The signals name nothing the
// search looks for; they are what the lock says and what the oracle sees.

// actedAt is one action and when it began, for reading the signals.
type actedAt struct {
	at time.Time
	a  Action
}

// signals are the distinct signals of a run, sorted.
func signals(logs [][]byte, grants []Grant, doubles []DoubleGrant, acted []actedAt, born map[int]time.Time, addrs []string) []string {
	set := map[string]bool{}
	for _, log := range logs {
		sc := bufio.NewScanner(bytes.NewReader(log))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if s := logSignal(sc.Text(), acted, addrs); s != "" {
				set[s] = true
			}
		}
	}
	for _, g := range grants {
		// What the process met the nodes after, and what it was granted
		// after: a pair of actions, as a fuzzer of code counts the edges
		// between branches.
		set[fmt.Sprintf("grant ttl=%s to a process started after %s, after %s", g.TTL,
			lastOp(acted, -1, born[g.PID]), lastOp(acted, -1, time.Unix(0, g.Acquired)))] = true
	}
	for _, d := range doubles {
		set[fmt.Sprintf("%s ttl=%s/%s after %s", d.Kind, d.First.TTL, d.Second.TTL, lastOp(acted, -1, time.Unix(0, d.Second.Acquired)))] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// logSignal is the signal of one line of a holder's log (slog's text
// form), "" for a line that is none: the level and the message's first
// words, the last action on the node it names before it was logged, and
// the holder's TTL.
func logSignal(text string, acted []actedAt, addrs []string) string {
	f := logFields(text)
	msg := f["msg"]
	if msg == "" {
		return ""
	}
	words := strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == ',' || r == ':' })
	msg = strings.Join(words[:min(len(words), 6)], " ")
	node := slices.Index(addrs, f["node"])
	at, err := time.Parse(time.RFC3339Nano, f["time"])
	if err != nil {
		at = time.Now()
	}
	// A node never acted on reads "after nothing"; a line naming no node,
	// the last action on any.
	return fmt.Sprintf("%s %q after %s ttl=%s", f["level"], msg, lastOp(acted, node, at), f["ttl"])
}

// lastOp is the op of the last operator action before t on node (any node
// for -1), with its word; "nothing" if none.
func lastOp(acted []actedAt, node int, t time.Time) string {
	for i := len(acted) - 1; i >= 0; i-- {
		a := acted[i]
		if a.at.After(t) || a.a.Node < 0 || (node >= 0 && a.a.Node != node) {
			continue
		}
		if a.a.Arg != "" && len(Ops[a.a.Op].args) > 0 {
			return a.a.Op + " " + a.a.Arg
		}
		return a.a.Op
	}
	return "nothing"
}

// logFields reads one line of slog's text form: key=value pairs, a value
// quoted when it holds spaces.
func logFields(line string) map[string]string {
	f := map[string]string{}
	for line != "" {
		line = strings.TrimLeft(line, " ")
		key, rest, ok := strings.Cut(line, "=")
		if !ok || strings.Contains(key, " ") {
			return f
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return f
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			val, rest, _ = strings.Cut(rest, " ")
		}
		f[key] = val
		line = rest
	}
	return f
}
