package docs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/loadtest"
)

// The labs, one sheet each under docs/labs.

// cell is one cell of the matrix a lab names, with the outcome it expects
// and, for a cell that breaks, the figures that show it (any of them).
type cell struct {
	variant, scenario string
	expect            loadtest.Outcome
	figures           []string
}

func (c cell) id() string { return c.variant + "/" + c.scenario }

// readRef is a line range a lab asks the reader to read, and the line in it
// that is the point.
type readRef struct {
	file     string
	from, to int
	marker   string
	path     int // the step of Lab 1's reading path, if it is one
}

type lab struct {
	title   string
	body    string
	sweeps  [][]string // load-runner sweeps beside the lab's command
	cells   []cell
	reads   []readRef
	command []string // the words after "go run ./loadtest/cmd/loadtest"
	runTest bool
}

var attr = regexp.MustCompile(`([a-z]+)=("(?:[^"\\]|\\.)*"|\S+)`)

// attrs parses key=value pairs; a value may be a double-quoted string.
func attrs(s string) [][2]string {
	var out [][2]string
	for _, m := range attr.FindAllStringSubmatch(s, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		out = append(out, [2]string{m[1], v})
	}
	return out
}

// sections splits Markdown into its "## " sections: title and body.
func sections(md string) [][2]string {
	var out [][2]string
	for _, part := range strings.Split("\n"+md, "\n## ")[1:] {
		title, body, _ := strings.Cut(part, "\n")
		out = append(out, [2]string{title, body})
	}
	return out
}

// section is the body of the "## title" section of a Markdown text, or "".
func section(md, title string) string {
	for _, sec := range sections(md) {
		if sec[0] == title {
			return sec[1]
		}
	}
	return ""
}

// fences are the contents of the ```sh blocks of a Markdown text.
func fences(md string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(md, -1) {
		out = append(out, m[1])
	}
	return out
}

const runnerCmd = "go run ./loadtest/cmd/loadtest"

func labs(t *testing.T) []lab {
	t.Helper()
	var out []lab
	labLine := regexp.MustCompile(`<!-- lab: (.*?)-->`)
	readLine := regexp.MustCompile(`<!-- read: (.*?)-->`)
	for _, sec := range sections(labText(t)) {
		m := labLine.FindAllStringSubmatch(sec[1], -1)
		if len(m) == 0 {
			continue
		}
		if len(m) > 1 {
			t.Fatalf("section %q has %d lab lines, want one", sec[0], len(m))
		}
		l := lab{title: sec[0], body: sec[1]}
		for _, kv := range attrs(m[0][1]) {
			switch kv[0] {
			case "cell":
				f := strings.Split(kv[1], ":")
				v, s, ok := strings.Cut(f[0], "/")
				if !ok || len(f) < 2 {
					t.Fatalf("%s: cell %q, want variant/scenario:holds|breaks[:figure|figure]", l.title, kv[1])
				}
				c := cell{variant: v, scenario: s, expect: loadtest.Outcome(f[1])}
				if len(f) > 2 {
					c.figures = strings.Split(f[2], "|")
				}
				l.cells = append(l.cells, c)
			case "run":
				l.runTest = kv[1] == "test"
			default:
				t.Fatalf("%s: unknown lab attribute %q", l.title, kv[0])
			}
		}
		for _, r := range readLine.FindAllStringSubmatch(sec[1], -1) {
			var ref readRef
			for _, kv := range attrs(r[1]) {
				switch kv[0] {
				case "file":
					ref.file = kv[1]
				case "lines":
					a, b, _ := strings.Cut(kv[1], "-")
					ref.from, _ = strconv.Atoi(a)
					ref.to, _ = strconv.Atoi(b)
				case "marker":
					ref.marker = kv[1]
				case "path":
					ref.path, _ = strconv.Atoi(kv[1])
				}
			}
			l.reads = append(l.reads, ref)
		}
		for _, f := range fences(sec[1]) {
			line := strings.TrimSpace(f)
			if rest, ok := strings.CutPrefix(line, runnerCmd); ok {
				if strings.Contains(rest, " -sweep") {
					// A sweep measures speed; it runs no cells.
					l.sweeps = append(l.sweeps, strings.Fields(rest))
					continue
				}
				if l.command != nil {
					t.Fatalf("%s: more than one load-runner command", l.title)
				}
				if strings.Contains(rest, "\n") {
					t.Fatalf("%s: the command is more than one line", l.title)
				}
				l.command = strings.Fields(rest)
			}
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		t.Fatal("docs/labs has no labs")
	}
	return out
}

// Every lab expects what the load runner's matrix expects, and says so in
// its text.
func TestLabsMatchTheMatrix(t *testing.T) {
	auditFigures := []string{"oversold_units", "lost_updates", "double_booked_seats", "stuck_locks"}
	for _, l := range labs(t) {
		if len(l.cells) == 0 {
			t.Errorf("%s: no cells", l.title)
		}
		for _, c := range l.cells {
			want, ok := loadtest.Expected(c.variant, c.scenario)
			if !ok {
				t.Errorf("%s: %s is not a cell of the matrix", l.title, c.id())
				continue
			}
			if c.expect != want {
				t.Errorf("%s: expects %s × %s to %s; the matrix says %s", l.title, c.variant, c.scenario, c.expect, want)
			}
			prose := fmt.Sprintf("`%s` × `%s` **%s**", c.variant, c.scenario, c.expect)
			if !strings.Contains(strings.Join(strings.Fields(l.body), " "), prose) {
				t.Errorf("%s: the text never says %q", l.title, prose)
			}
			for _, f := range c.figures {
				if !slices.Contains(auditFigures, f) && f != "stale_fence" {
					t.Errorf("%s: %s shows %q, which is neither an audit figure %v nor stale_fence", l.title, c.id(), f, auditFigures)
				}
			}
			if c.expect == loadtest.Breaks && len(c.figures) == 0 {
				t.Errorf("%s: %s breaks, but the lab names no figure that shows it", l.title, c.id())
			}
		}
	}
}

// The labs climb the whole ladder: every variant has a lab, every broken
// one breaks under the fault that shows it, and the guide ends with
// Redlock's node restarts and fencing tokens.
func TestLabsCoverTheLadder(t *testing.T) {
	ls := labs(t)
	has := map[string]loadtest.Outcome{}
	variants := map[string]bool{}
	for _, l := range ls {
		for _, c := range l.cells {
			has[c.id()] = c.expect
			variants[c.variant] = true
		}
	}
	for _, v := range loadtest.Variants {
		if !variants[v] {
			t.Errorf("no lab runs %s", v)
		}
	}
	for id, want := range map[string]loadtest.Outcome{
		"none/clean":                              loadtest.Breaks,
		"setnx-expire/crash-between-steps":        loadtest.Breaks,
		"get-del/pause-between-release-steps":     loadtest.Breaks,
		"plain-del/pause-in-critical-section":     loadtest.Breaks,
		"lua/pause-in-critical-section":           loadtest.Breaks,
		"lua+fence/pause-in-critical-section":     loadtest.Holds,
		"redlock/node-down":                       loadtest.Holds,
		"redlock/node-restart-unaware":            loadtest.Breaks,
		"redlock/node-restart":                    loadtest.Holds,
		"redlock+fence/pause-in-critical-section": loadtest.Holds,
	} {
		if has[id] != want {
			t.Errorf("no lab shows %s %s", id, want)
		}
	}
	// The ladder's last lab: the one before the labs that go past
	// Redlock's assumptions (clock jumps, late replies, partitions), which
	// come after it with everything else past the ladder.
	last := ls[len(ls)-1]
	if past := slices.IndexFunc(ls, func(l lab) bool {
		return slices.ContainsFunc(l.cells, func(c cell) bool { return c.scenario == loadtest.ClockJump })
	}); past > 0 {
		last = ls[past-1]
	}
	if !slices.ContainsFunc(last.cells, func(c cell) bool { return c.variant == "redlock+fence" }) ||
		!slices.ContainsFunc(last.cells, func(c cell) bool { return c.scenario == loadtest.NodeRestart }) {
		t.Errorf("the last lab (%s) is not Redlock's node restarts with fencing tokens", last.title)
	}
	if runs := slices.IndexFunc(ls, func(l lab) bool { return l.runTest }); runs < 0 {
		t.Errorf("no lab is marked run=test")
	}
}

// Every command uses the runner's real flags and selects exactly the lab's
// cells.
func TestLabCommands(t *testing.T) {
	testsupport.Long(t, "builds the load runner to run the labs' commands")
	_, runner := binaries(t)
	fs := helpOf(t, runner)
	for _, l := range labs(t) {
		for _, sweep := range l.sweeps {
			for _, w := range sweep {
				name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
				if _, ok := fs.takesValue[name]; strings.HasPrefix(w, "-") && !ok {
					t.Errorf("%s: -%s is not a flag of the load runner", l.title, name)
				}
			}
		}
		if l.command == nil {
			t.Errorf("%s: no `%s …` command", l.title, runnerCmd)
			continue
		}
		sel := map[string]string{}
		for i := 0; i < len(l.command); i++ {
			w := l.command[i]
			name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if !strings.HasPrefix(w, "-") {
				t.Errorf("%s: stray argument %q", l.title, w)
				continue
			}
			takes, ok := fs.takesValue[name]
			if !ok {
				t.Errorf("%s: -%s is not a flag of the load runner", l.title, name)
				continue
			}
			if takes && !hasValue {
				if i+1 >= len(l.command) {
					t.Errorf("%s: -%s needs a value", l.title, name)
					continue
				}
				i++
				value = l.command[i]
			}
			sel[name] = value
		}
		if !strings.Contains(strings.Join(l.command, " "), "-strict") {
			t.Errorf("%s: the command lacks -strict (exit 0 must mean the lab did what it says)", l.title)
		}
		got := selected(sel)
		var want []string
		for _, c := range l.cells {
			want = append(want, c.id())
		}
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the command runs %v; the lab names %v", l.title, got, want)
		}
	}
}

// selected is the set of cells a run with these flags runs, as the runner
// picks them: rows × columns in the matrix, narrowed by -cells.
func selected(flags map[string]string) []string {
	pick := func(v string, all []string) []string {
		if v == "" || v == "all" {
			return all
		}
		return strings.Split(v, ",")
	}
	var cells []string
	if flags["cells"] != "" {
		cells = strings.Split(flags["cells"], ",")
	}
	var out []string
	for _, v := range pick(flags["variants"], loadtest.Variants) {
		for _, s := range pick(flags["scenarios"], loadtest.ScenarioNames()) {
			if _, ok := loadtest.Expected(v, s); !ok {
				continue
			}
			if cells != nil && !slices.Contains(cells, v+"/"+s) {
				continue
			}
			out = append(out, v+"/"+s)
		}
	}
	sort.Strings(out)
	return out
}

// Every line range a lab points at exists, holds the line it is about, and
// is the range the text gives.
func TestLabReadsExist(t *testing.T) {
	for _, l := range labs(t) {
		if len(l.reads) == 0 {
			t.Errorf("%s: no code to read", l.title)
		}
		for _, r := range l.reads {
			b, err := os.ReadFile(filepath.Join(root, r.file))
			if err != nil {
				t.Errorf("%s: %v", l.title, err)
				continue
			}
			lines := strings.Split(string(b), "\n")
			if r.from < 1 || r.to < r.from || r.to > len(lines) {
				t.Errorf("%s: %s lines %d–%d: the file has %d lines", l.title, r.file, r.from, r.to, len(lines))
				continue
			}
			if r.marker == "" {
				t.Errorf("%s: %s lines %d–%d names no marker line", l.title, r.file, r.from, r.to)
			} else if span := strings.Join(lines[r.from-1:r.to], "\n"); !strings.Contains(span, r.marker) {
				at := slices.IndexFunc(lines, func(s string) bool { return strings.Contains(s, r.marker) })
				t.Errorf("%s: %s lines %d–%d no longer hold %q (now at line %d); update the range", l.title, r.file, r.from, r.to, r.marker, at+1)
			}
			if !saysRange(l.body, r) {
				t.Errorf("%s: the text does not say \"`%s` lines %d–%d\"", l.title, r.file, r.from, r.to)
			}
		}
	}
}

// reportCell is what TestLabRuns reads of a cell in the runner's report.json.
type reportCell struct {
	Variant  string         `json:"variant"`
	Scenario string         `json:"scenario"`
	Seen     string         `json:"seen"`
	Verdict  string         `json:"verdict"`
	Audit    map[string]any `json:"audit"`
	Vegeta   struct {
		Counts struct {
			ByError map[string]float64 `json:"by_error"`
		} `json:"counts"`
	} `json:"vegeta"`
}

// saysRange reports whether text gives r's range as "lines A–B" after
// naming r's file ("`lock/x.go` lines 1–9", or "… lines 1–9 and lines
// 20–29" with no other file named in between).
func saysRange(text string, r readRef) bool {
	return saysRangeAs(text, r, "lines %d–%d")
}

// saysRangeAs is saysRange with the range in the words of format ("lines
// %d–%d", "第 %d–%d 行").
func saysRangeAs(text string, r readRef, format string) bool {
	text = strings.Join(strings.Fields(text), " ")
	path := regexp.MustCompile("`([a-z0-9_./-]+\\.go)`")
	lines := fmt.Sprintf(format, r.from, r.to)
	for off := 0; ; {
		i := strings.Index(text[off:], lines)
		if i < 0 {
			return false
		}
		before := path.FindAllStringSubmatch(text[:off+i], -1)
		if len(before) > 0 && before[len(before)-1][1] == r.file {
			return true
		}
		off += i + len(lines)
	}
}

// The lab marked run=test is run for real, exactly as written (with the
// binaries built once instead of go run), and its cells do what it says.
func TestLabRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a load test")
	}
	testsupport.Need(t, "redis-server", "start the load runner's Redis nodes")
	idx := slices.IndexFunc(labs(t), func(l lab) bool { return l.runTest })
	if idx < 0 {
		t.Fatal("no lab is marked run=test")
	}
	l := labs(t)[idx]
	app, runner := binaries(t)
	out := t.TempDir()
	args := append(slices.Clone(l.command), "-app-bin", app, "-out", out, "-progress=false")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, runner, args...)
	cmd.Dir, cmd.Env = t.TempDir(), testsupport.CleanEnv()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // the runner stops what it started
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	stdout, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s: %s %s: %v\n%s\n%s", l.title, runnerCmd, strings.Join(l.command, " "), err, stdout, stderr)
	}
	t.Logf("%s ran in %v", l.title, time.Since(start).Round(100*time.Millisecond))

	var rep struct {
		Cells []reportCell `json:"cells"`
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range l.cells {
		i := slices.IndexFunc(rep.Cells, func(rc reportCell) bool {
			return rc.Variant == c.variant && rc.Scenario == c.scenario
		})
		if i < 0 {
			t.Errorf("%s: the run has no cell %s", l.title, c.id())
			continue
		}
		rc := rep.Cells[i]
		if rc.Seen != string(c.expect) || rc.Verdict != "ok" {
			t.Errorf("%s: %s seen %s (verdict %s), the lab expects %s\n%s", l.title, c.id(), rc.Seen, rc.Verdict, c.expect, stdout)
		}
		if len(c.figures) == 0 {
			continue
		}
		shown := false
		for _, f := range c.figures {
			if n, _ := rc.Audit[f].(float64); n > 0 {
				shown = true
			}
			if rc.Vegeta.Counts.ByError[f] > 0 {
				shown = true
			}
		}
		if !shown {
			t.Errorf("%s: %s shows none of %v\n%s", l.title, c.id(), c.figures, stdout)
		}
	}
}

// Lab 1's reading path is short: with the speed layer off, an order under
// lua reaches its SET … NX PX and its release through at most eight named
// functions in at most five files, each step's range holding its call of
// the next (the marker, checked by TestLabReadsExist).
func TestLab1ReadingPathIsShort(t *testing.T) {
	var steps []readRef
	for _, l := range labs(t) {
		if strings.HasPrefix(l.title, "Lab 1 ") {
			for _, r := range l.reads {
				if r.path > 0 {
					steps = append(steps, r)
				}
			}
		}
	}
	files := map[string]bool{}
	for i, r := range steps {
		if r.path != i+1 {
			t.Errorf("step %d of the path is numbered %d", i+1, r.path)
		}
		files[r.file] = true
	}
	if len(steps) == 0 || len(steps) > 8 || len(files) > 5 {
		t.Fatalf("Lab 1's reading path has %d steps in %d files, want 1 to 8 in at most 5", len(steps), len(files))
	}
	if last := steps[len(steps)-1]; !strings.Contains(last.marker, "compareAndDelete") {
		t.Errorf("the path ends at %q, not at lua's release", last.marker)
	}
}
