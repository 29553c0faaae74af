package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/loadtest"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// attendeeFix is what an attendee changes in lock/ladder/attendee.go to reach lua's
// row: the starter's flawed check after SET NX, and its release.
var attendeeFix = []struct{ from, to, with string }{
	{ // SET NX answers redis.Nil when it set nothing: the lock is held.
		from: "	if err != nil && !errors.Is(err, redis.Nil) {", to: "	}\n",
		with: "	if errors.Is(err, redis.Nil) {\n		return 0, lock.ErrNotAcquired\n	}\n	if err != nil {\n		return 0, down(v.rdb, err)\n	}\n",
	},
	{ // The check and the delete in one script: nothing between them.
		from: "func (v attendee) Release(", to: "\n}\n",
		with: `func (v attendee) Release(ctx context.Context, checkpoint step, key, value string) error {
	return v.lua.Release(ctx, checkpoint, key, value) // one script: nothing comes between the check and the delete
}
`,
	},
}

// The check command of the workshop's last lab goes red on the attendees'
// starter rung as shipped, and green once its two flaws are fixed: the same
// command, on a copy of the module whose lock/ladder/attendee.go carries the fix.
func TestAttendeeCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the load runner twice")
	}
	testsupport.Need(t, "redis-server", "start the load runner's Redis nodes")
	root := testsupport.Root(t)
	fixed := copyModule(t, root)
	path := filepath.Join(fixed, "lock", "ladder", "attendee.go")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for _, f := range attendeeFix {
		i := strings.Index(src, f.from)
		j := strings.Index(src[max(i, 0):], f.to)
		if i < 0 || j < 0 {
			t.Fatalf("lock/ladder/attendee.go no longer holds the flaw at %q; update attendeeFix", f.from)
		}
		src = src[:i] + f.with + src[i+j+len(f.to):]
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}

	scenarios := []string{loadtest.Clean, loadtest.CrashBetweenSteps, loadtest.PauseBetweenReleaseSteps}
	for _, tc := range []struct {
		name   string
		module string
		want   int // exit status
		seen   loadtest.Outcome
	}{
		{"starter as shipped", root, 1, loadtest.Breaks},
		{"fixed", fixed, 0, loadtest.Holds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := []string{"-variants", ladder.Attendee, "-scenarios", strings.Join(scenarios, ","), "-judge-as", lock.Lua, "-strict",
				"-module", tc.module, "-out", out, "-progress=false", "-duration", "2s"}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, args, func(string) string { return "" }, &stdout, &stderr)
			if code != tc.want {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.want, stdout.String(), stderr.String())
			}
			var rep struct {
				Cells []struct {
					Scenario string           `json:"scenario"`
					Expected loadtest.Outcome `json:"expected"`
					Seen     loadtest.Outcome `json:"seen"`
				} `json:"cells"`
			}
			b, err := os.ReadFile(filepath.Join(out, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Cells) != len(scenarios) {
				t.Fatalf("%d cells, want %d\n%s", len(rep.Cells), len(scenarios), stdout.String())
			}
			for _, c := range rep.Cells {
				if c.Expected != loadtest.Holds {
					t.Errorf("%s: expected %s; judged as lua it must hold", c.Scenario, c.Expected)
				}
				// The starter's acquire takes a held lock: every cell breaks.
				if c.Seen != tc.seen {
					t.Errorf("%s: seen %s, want %s\n%s", c.Scenario, c.Seen, tc.seen, stdout.String())
				}
			}
		})
	}
}

// copyModule copies the module's files (not its history, nor run output)
// into a temporary directory and returns it.
func copyModule(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || rel == "out" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() || strings.HasSuffix(d.Name(), ".db") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
