// Package cli holds what the project's commands share when they read their
// flags (a comma-separated list of names or of numbers, a selection from a
// list of known names) and the runtime setting they both make (LessGC).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// Split turns a comma-separated flag value into its non-empty parts, each
// trimmed of spaces.
func Split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Join is the comma-separated flag value of the numbers ns, as Split reads
// it back: a default to show in a flag's usage, or to set in its place.
func Join(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// Pick selects from known the names in the comma-separated sel, in known's
// order; "" and "all" select every name. A name not in known is an error,
// and so is a selection that names nothing.
func Pick(sel string, known []string) ([]string, error) {
	if sel == "" || sel == "all" {
		return slices.Clone(known), nil
	}
	want := map[string]bool{}
	for _, s := range Split(sel) {
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("unknown name %q (known: %s)", s, strings.Join(known, ", "))
		}
		want[s] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty selection %q", sel)
	}
	return out, nil
}

// Parse parses a command's flags from args and refuses positional
// arguments. ok is true when the command should go on; otherwise exit is
// its exit status: 0 after -h, 2 after a flag that does not parse (which
// fs has already reported) or an argument it does not take.
func Parse(fs *flag.FlagSet, args []string, stderr io.Writer) (exit int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return 2, false
	}
	return 0, true
}

// gcPercent is the garbage collector's target that LessGC sets: a
// collection when the heap has grown to five times what the last one left.
const gcPercent = 400

// LessGC makes the garbage collector run a quarter as often as Go's default
// (GOGC=100), unless GOGC is set, which wins. Both commands allocate mostly
// short-lived garbage per request over a small live heap, and at a spike's
// peak a collection every few milliseconds takes the CPU that the lock's
// hand-offs between instances wait for (docs/performance.md). The price is
// memory: a heap up to five times the live one, tens of megabytes here.
func LessGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}
