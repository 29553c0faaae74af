package opfuzz_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/loadtest/opfuzz"
)

// holderEnv makes the test binary one holder process: the tests' holders
// are this binary run again, as the command's are the command.
const holderEnv = "OPFUZZ_TEST_HOLDER"

func TestMain(m *testing.M) {
	if os.Getenv(holderEnv) == "1" {
		if err := opfuzz.HolderMain(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(testsupport.Main(m))
}

// The same seed gives the same sequence, another seed another one, and
// every generated sequence reads back as itself.
func TestGenerateIsDeterministic(t *testing.T) {
	distinct := map[string]bool{}
	for seed := int64(1); seed <= 50; seed++ {
		a := opfuzz.Generate(seed, 5, opfuzz.DefaultSpace)
		b := opfuzz.Generate(seed, 5, opfuzz.DefaultSpace)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d gave %q, then %q", seed, a, b)
		}
		back, err := opfuzz.Parse(a.String(), 5)
		if err != nil {
			t.Fatalf("seed %d: %q does not parse: %v", seed, a, err)
		}
		if !slices.Equal(a, back) {
			t.Fatalf("seed %d: %q read back as %q", seed, a, back)
		}
		distinct[a.String()] = true
	}
	if len(distinct) < 45 {
		t.Fatalf("50 seeds gave only %d distinct sequences", len(distinct))
	}
	only := opfuzz.Space{Ops: []string{"restart", "wait"}, TTLs: []time.Duration{time.Second}, Waits: []time.Duration{time.Second}}
	for seed := int64(1); seed <= 20; seed++ {
		for _, a := range opfuzz.Generate(seed, 5, only) {
			if a.Op != "restart" && a.Op != "wait" {
				t.Fatalf("a space of restart and wait drew %q", a)
			}
		}
	}
}

// A mutation is a function of its parent and its seed: the same pair gives
// the same sequence, which reads back as itself, stays within the space and
// its bound, and most seeds change the parent.
func TestMutateIsDeterministic(t *testing.T) {
	parent := opfuzz.Generate(7, 5, opfuzz.DefaultSpace)
	changed := 0
	for seed := int64(1); seed <= 50; seed++ {
		a := opfuzz.Mutate(parent, seed, 5, opfuzz.DefaultSpace)
		if b := opfuzz.Mutate(parent, seed, 5, opfuzz.DefaultSpace); !slices.Equal(a, b) {
			t.Fatalf("seed %d gave %q, then %q", seed, a, b)
		}
		back, err := opfuzz.Parse(a.String(), 5)
		if err != nil || !slices.Equal(a, back) {
			t.Fatalf("seed %d: %q read back as %q (%v)", seed, a, back, err)
		}
		if len(a) > 24 {
			t.Fatalf("seed %d: %d actions", seed, len(a))
		}
		if !slices.Equal(a, parent) {
			changed++
		}
	}
	if changed < 35 {
		t.Fatalf("50 seeds changed the parent %d times", changed)
	}
	only := opfuzz.Space{Ops: []string{"restart", "wait", "holder"}, TTLs: []time.Duration{time.Second}, Waits: []time.Duration{time.Second}}
	parent = opfuzz.Generate(7, 5, only)
	for seed := int64(1); seed <= 50; seed++ {
		for _, a := range opfuzz.Mutate(parent, seed, 5, only) {
			if a.Op != "restart" && a.Op != "wait" && a.Op != "holder" {
				t.Fatalf("a space of restart, wait and holder drew %q", a)
			}
		}
	}
}

// A sequence that reads wrong is refused with what is wrong.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", "no actions"},
		{"dance 2", "unknown op"},
		{"flushall", "takes 1 argument"},
		{"flushall 5", "want 0 to 4"},
		{"restart 1 maybe", "want one of keep, wipe"},
		{"wait forever", "duration"},
	} {
		_, err := opfuzz.Parse(tc.text, 5)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.text, err, tc.want)
		}
	}
}

// The shrinker, on a failure that needs three actions (a holder, a restart
// without data of node 2, and a wait of at least 200 ms after it) hidden in
// a long sequence, returns exactly those three, with the wait shortened as
// far as the failure allows.
func TestShrinkShrinks(t *testing.T) {
	seq, err := opfuzz.Parse(`wait 2s; holder redlock 6s; flushall 1; save 2; wait 1s
		resetstat 2; restart 2 wipe; acl 2 -eval; wait 100ms; holder redlock 1s; wait 3200ms; scriptflush 0`, 5)
	if err != nil {
		t.Fatal(err)
	}
	fails := func(_ context.Context, s opfuzz.Sequence) bool {
		holder, restarted := false, false
		for _, a := range s {
			switch {
			case a.Op == "holder" && a.D == 6*time.Second:
				holder = true
			case a.Op == "restart" && a.Node == 2 && a.Arg == "wipe" && holder:
				restarted = true
			case a.Op == "wait" && restarted && a.D >= 200*time.Millisecond:
				return true
			}
		}
		return false
	}
	tries := 0
	counted := func(ctx context.Context, s opfuzz.Sequence) bool { tries++; return fails(ctx, s) }
	got := opfuzz.Shrink(context.Background(), seq, counted, 100)
	if want := "holder redlock 6s; restart 2 wipe; wait 200ms"; got.String() != want {
		t.Fatalf("shrunk to %q, want %q", got, want)
	}
	t.Logf("%d tries", tries)
	// Dropping the flush between two waits joins them: the sum, not two.
	joined, err := opfuzz.Parse("holder redlock 6s; restart 2 wipe; wait 100ms; flushall 1; wait 150ms", 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := opfuzz.Shrink(context.Background(), joined, fails, 20); got.String() != "holder redlock 6s; restart 2 wipe; wait 250ms" {
		t.Fatalf("shrunk to %q, want the two waits joined", got)
	}
	tries = 0
	if short := opfuzz.Shrink(context.Background(), seq, counted, 3); tries > 3 || !fails(context.Background(), short) {
		t.Fatalf("with a budget of 3 tries: %d tries, %q", tries, short)
	}
}

// The oracle: overlapping grants of one key to two owners are a double
// grant; between fenced leases whose later token is larger, one the store
// refuses; one owner, other keys, or intervals that only touch are none.
func TestCheck(t *testing.T) {
	g := func(owner, key string, from, to int64, fenced bool, token uint64) opfuzz.Grant {
		return opfuzz.Grant{Owner: owner, Key: key, Acquired: from, ValidUntil: to, Fenced: fenced, Token: token}
	}
	for _, tc := range []struct {
		name   string
		grants []opfuzz.Grant
		want   []string
	}{
		{"overlap", []opfuzz.Grant{g("a", "k", 0, 10, false, 0), g("b", "k", 5, 15, false, 0)}, []string{opfuzz.Unsafe}},
		{"one after the other", []opfuzz.Grant{g("a", "k", 0, 10, false, 0), g("b", "k", 10, 15, false, 0)}, nil},
		{"released early", []opfuzz.Grant{{Owner: "a", Key: "k", Acquired: 0, ValidUntil: 10, Released: 4}, g("b", "k", 5, 15, false, 0)}, nil},
		{"other keys", []opfuzz.Grant{g("a", "k", 0, 10, false, 0), g("b", "j", 5, 15, false, 0)}, nil},
		{"fenced, later token larger", []opfuzz.Grant{g("a", "k", 0, 10, true, 3), g("b", "k", 5, 15, true, 4)}, []string{opfuzz.Fenced}},
		{"fenced, later token not larger", []opfuzz.Grant{g("a", "k", 0, 10, true, 4), g("b", "k", 5, 15, true, 4)}, []string{opfuzz.Unsafe}},
		{"one fenced, one not", []opfuzz.Grant{g("a", "k", 0, 10, true, 3), g("b", "k", 5, 15, false, 0)}, []string{opfuzz.Unsafe}},
		{"three at once", []opfuzz.Grant{g("a", "k", 0, 10, false, 0), g("b", "k", 2, 12, false, 0), g("c", "k", 4, 8, false, 0)}, []string{opfuzz.Unsafe, opfuzz.Unsafe, opfuzz.Unsafe}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range opfuzz.Check(tc.grants) {
				got = append(got, d.Kind)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Check = %v, want %v", got, tc.want)
			}
		})
	}
}

// The sequences in attacks.txt read.
func TestAttacksParse(t *testing.T) {
	attacks, err := opfuzz.Attacks()
	if err != nil {
		t.Fatal(err)
	}
	if len(attacks) < 3 {
		t.Fatalf("%d attacks", len(attacks))
	}
}

// holderConfig is a Config whose holders are this test binary.
func holderConfig(t *testing.T) opfuzz.Config {
	testsupport.RequireRedis(t)
	return opfuzz.Config{Holder: opfuzz.HolderCommand(os.Args[0], nil, "", holderEnv+"=1")}
}

// With restart awareness off, the search, given a space of restarts,
// holders and waits and a fixed seed, finds a double grant through a
// restart without data (wiped, or kept before any SAVE: the node comes back
// empty either way) and shrinks it to its cause: a holder, the restart and
// a second holder, with at most the waits between them that give the
// contender's minority time to lapse (the timing is real, so a wait that
// makes the race likelier is kept). It is the real race: nothing here but
// the holders' lock knows that awareness is off.
func TestFuzzFindsRestartWithoutData(t *testing.T) {
	cfg := holderConfig(t)
	cfg.AwarenessOff = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rn := opfuzz.NewRunner(ctx, cfg, time.Second)
	defer rn.Close()
	// Short: fewer candidates, so the sequence need only get shorter.
	budget, runs, most := 24, 3, 3
	if testing.Short() {
		budget, runs, most = 10, 2, 0
	}
	rep, err := opfuzz.Search(ctx, rn, opfuzz.SearchOptions{
		Seed: 3, Duration: 2 * time.Minute, Sequences: 8, ShrinkRuns: runs, ShrinkBudget: budget, StopAtFirst: true,
		Space: opfuzz.Space{
			Ops:   []string{"restart", "holder", "wait"},
			TTLs:  []time.Duration{time.Second},
			Waits: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) == 0 {
		t.Fatalf("no double grant in %d sequences: %s", len(rep.Sequences), rep.Summary())
	}
	f := rep.Findings[0]
	shrunk, err := opfuzz.Parse(f.Shrunk, 5)
	if err != nil {
		t.Fatalf("the shrunk sequence %q: %v", f.Shrunk, err)
	}
	restarts, acts := 0, 0
	for _, a := range shrunk {
		switch a.Op {
		case "restart":
			restarts++
		case "wait":
			continue
		}
		acts++
	}
	found, _ := opfuzz.Parse(f.Sequence, 5)
	if most == 0 {
		most = len(found) - 1
	}
	if f.Kind != opfuzz.Unsafe || acts > most || len(shrunk) >= len(found) || restarts == 0 {
		t.Fatalf("found %s %q, shrunk to %q: want a double grant, shrunk to at most %d actions besides waits, one a restart", f.Kind, f.Sequence, f.Shrunk, most)
	}
	t.Logf("%s", rep.Summary())
}
