package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// TestMain lets the test binary be a contender too: the benchmark
// re-executes its own binary, which under go test is this one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		os.Exit(childMain(context.Background(), os.Args[2:]))
	}
	os.Exit(m.Run())
}

// A one-second run over two processes: the tool runs end to end, Redlock
// lets no two sections overlap across the processes, and the overlap count
// is not blind — no lock at all overlaps at once.
func TestSmoke(t *testing.T) {
	testsupport.RequireRedis(t)
	if testing.Short() {
		t.Skip("starts Redis nodes and contender processes for about ten seconds")
	}
	out := filepath.Join(t.TempDir(), "hotkey.json")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-procs", "2", "-goroutines", "4", "-duration", "1s", "-variants", "none,redlock", "-json", out}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	t.Logf("\n%s", stdout.String())
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.Processes != 2 || r.PerProcess != 2 || r.Sections == 0 {
			t.Errorf("%s: %d processes × %d, %d sections; want 2 × 2 and some sections", r.Variant, r.Processes, r.PerProcess, r.Sections)
		}
		switch r.Variant {
		case ladder.None:
			if r.Overlaps == 0 {
				t.Errorf("none: no overlap counted; the check cannot see one")
			}
		case lock.Redlock:
			if r.Overlaps != 0 {
				t.Errorf("redlock: %d sections overlapped (longest %v)", r.Overlaps, r.Overlap)
			}
			if r.Ceiling <= 0 || r.Uncontended <= 0 {
				t.Errorf("redlock: ceiling %.0f/s from uncontended %v", r.Ceiling, r.Uncontended)
			}
			if h := r.Handoffs; h.Local+h.Across != r.Sections-1 || h.Across == 0 {
				t.Errorf("redlock: %d hand-offs here and %d across for %d sections over 2 processes", h.Local, h.Across, r.Sections)
			}
			if r.TriesPerGrant < 1 {
				t.Errorf("redlock: %.2f tries per grant; every grant takes at least one", r.TriesPerGrant)
			}
		}
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-procs", "3"}, "does not split evenly"},
		{[]string{"-procs", "x"}, "not a process count"},
		{[]string{"-variants", "mutex"}, `unknown variant "mutex"`},
		{[]string{"extra"}, "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), tc.want)
			}
		})
	}
}

// Overlaps are counted across processes from the intervals alone.
func TestOverlaps(t *testing.T) {
	cases := []struct {
		name    string
		in      []section
		n       int
		longest time.Duration
	}{
		{"none", []section{{Start: 0, End: 10}, {Start: 10, End: 20}, {Start: 25, End: 30}}, 0, 0},
		{"one", []section{{Start: 0, End: 10}, {Start: 8, End: 20}}, 1, 2},
		{"nested", []section{{Start: 0, End: 100}, {Start: 10, End: 20}, {Start: 30, End: 40}}, 2, 10},
		{"unsorted", []section{{Start: 50, End: 60}, {Start: 0, End: 55}}, 1, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, longest := overlaps(tc.in)
			if n != tc.n || longest != tc.longest {
				t.Errorf("overlaps = %d, longest %v; want %d, %v", n, longest, tc.n, tc.longest)
			}
		})
	}
}
