package docs

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/redis/go-redis/v9"

	"flashsale/loadtest"
)

// root is the module root; line ranges and links are relative to it.
const root = ".."

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func inCI() bool { return os.Getenv("CI") == "true" }

// need skips the test without tool, except in CI (CI=true), where .ci/run
// installs it and its absence is a failure.
func need(t *testing.T, tool, why string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err == nil {
		return p
	}
	if inCI() {
		t.Fatalf("%s is not installed (needed to %s); .ci/run must install it", tool, why)
	}
	t.Skipf("%s is not installed (needed to %s); CI runs this test", tool, why)
	return ""
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cleanEnv is the environment without FLASHSALE_* variables, so -h shows
// the real defaults and the runs use their own settings.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLASHSALE_") {
			out = append(out, kv)
		}
	}
	return out
}

// built holds the storefront and the load runner, built once.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func binaries(t *testing.T) (app, runner string) {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "flashsale-docs-test-"); built.err != nil {
			return
		}
		for name, pkg := range map[string]string{"flashsale": ".", "loadtest": "./loadtest/cmd/loadtest"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(built.dir, name), pkg)
			cmd.Dir, cmd.Env = root, cleanEnv()
			if out, err := cmd.CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "flashsale"), filepath.Join(built.dir, "loadtest")
}

// flagSet is what a binary's -h says: each flag, and whether it takes a
// value (a bool flag does not).
type flagSet struct {
	takesValue map[string]bool
	env        map[string]bool
}

func helpOf(t *testing.T, bin string) flagSet {
	t.Helper()
	cmd := exec.Command(bin, "-h")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -h: %v\n%s", bin, err, out)
	}
	// flag.PrintDefaults writes "  -name type" for a flag with a value and
	// "  -name" (or "  -n<tab>usage") for a bool.
	fs := flagSet{takesValue: map[string]bool{"h": false}, env: map[string]bool{}}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)(?: (\w+))?`).FindAllStringSubmatch(string(out), -1) {
		fs.takesValue[m[1]] = m[2] != ""
	}
	for _, m := range regexp.MustCompile(`FLASHSALE_[A-Z0-9_]+`).FindAllString(string(out), -1) {
		fs.env[m] = true
	}
	if len(fs.takesValue) < 5 {
		t.Fatalf("%s -h lists only %d flags:\n%s", bin, len(fs.takesValue), out)
	}
	return fs
}

// ---------------------------------------------------------------------------
// The labs of workshop.md.

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
}

type lab struct {
	title   string
	body    string
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
	for _, sec := range sections(read(t, "docs/workshop.md")) {
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
				}
			}
			l.reads = append(l.reads, ref)
		}
		for _, f := range fences(sec[1]) {
			line := strings.TrimSpace(f)
			if rest, ok := strings.CutPrefix(line, runnerCmd); ok {
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
		t.Fatal("workshop.md has no labs")
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
	// The ladder's last lab; the one after it goes past Redlock's
	// assumptions (clock jumps, late replies, partitions).
	last := ls[len(ls)-1]
	if slices.ContainsFunc(last.cells, func(c cell) bool { return c.scenario == loadtest.ClockJump }) && len(ls) > 1 {
		last = ls[len(ls)-2]
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
	_, runner := binaries(t)
	fs := helpOf(t, runner)
	for _, l := range labs(t) {
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
	text = strings.Join(strings.Fields(text), " ")
	path := regexp.MustCompile("`([a-z0-9_./-]+\\.go)`")
	lines := fmt.Sprintf("lines %d–%d", r.from, r.to)
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
	need(t, "redis-server", "start the load runner's Redis nodes")
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
	cmd.Dir, cmd.Env = t.TempDir(), cleanEnv()
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

// ---------------------------------------------------------------------------
// The persistence lab: the compose file's Redis arguments, run here.

type redisProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	rdb    *redis.Client
}

func startRedis(t *testing.T, args []string) *redisProc {
	t.Helper()
	bin := need(t, "redis-server", "run the persistence lab's Redis node")
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &redisProc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.stop(syscall.SIGTERM) })
	port := args[slices.Index(args, "--port")+1]
	p.rdb = redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, MaxRetries: -1})
	t.Cleanup(func() { _ = p.rdb.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for p.rdb.Ping(context.Background()).Err() != nil {
		select {
		case <-p.exited:
			t.Fatalf("redis-server %s exited at start-up", strings.Join(args, " "))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer within 10s")
		}
	}
	return p
}

// stop signals the node, by PID, and waits for it to exit.
func (p *redisProc) stop(sig syscall.Signal) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func runID(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`run_id:(\w+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatal("INFO has no run_id")
	}
	return m[1]
}

// composeRedisArgs is the command of a Redis service of docker-compose.yml,
// with ${VAR:-default} resolved from env.
func composeRedisArgs(t *testing.T, service string, env map[string]string) []string {
	t.Helper()
	var doc struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "docker-compose.yml")), &doc); err != nil {
		t.Fatal(err)
	}
	s, ok := doc.Services[service]
	if !ok || len(s.Command) == 0 || s.Command[0] != "redis-server" {
		t.Fatalf("docker-compose.yml has no redis-server service %q", service)
	}
	ref := regexp.MustCompile(`\$\{([A-Z_]+):-([^}]*)\}`)
	var out []string
	for _, a := range s.Command[1:] {
		out = append(out, ref.ReplaceAllStringFunc(a, func(m string) string {
			sm := ref.FindStringSubmatch(m)
			if v := env[sm[1]]; v != "" {
				return v
			}
			return sm[2]
		}))
	}
	return out
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func TestPersistenceLab(t *testing.T) {
	var sec string
	for _, s := range sections(read(t, "docs/workshop.md")) {
		if strings.Contains(s[1], "<!-- persistence-lab:") {
			sec = s[1]
		}
	}
	if sec == "" {
		t.Fatal("workshop.md has no persistence lab")
	}
	var service, key string
	for _, kv := range attrs(regexp.MustCompile(`<!-- persistence-lab: (.*?)-->`).FindStringSubmatch(sec)[1]) {
		switch kv[0] {
		case "service":
			service = kv[1]
		case "key":
			key = kv[1]
		}
	}
	// The commands name real services and the lab's key.
	var doc struct {
		Services map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "docker-compose.yml")), &doc); err != nil {
		t.Fatal(err)
	}
	for _, f := range fences(sec) {
		for _, line := range strings.Split(strings.TrimSpace(f), "\n") {
			w := strings.Fields(line)
			if len(w) < 4 || w[0] != "docker" || w[1] != "compose" {
				t.Errorf("not a docker compose command: %q", line)
				continue
			}
			for _, s := range w[2:] {
				if regexp.MustCompile(`^(redis|app|postgres)(-\d+)?$`).MatchString(s) {
					if _, ok := doc.Services[s]; !ok {
						t.Errorf("%q names service %s, which docker-compose.yml does not have", line, s)
					}
				}
			}
			if strings.Contains(line, "redis-cli") && !strings.Contains(line, key) {
				t.Errorf("%q does not use the lab's key %s", line, key)
			}
		}
	}
	// The log line the lab quotes is the one the app writes.
	quote := regexp.MustCompile(`"(redis node restarted[^"]*)"`).FindStringSubmatch(strings.Join(strings.Fields(sec), " "))
	if quote == nil || !strings.Contains(read(t, "lock/node.go"), quote[1]) {
		t.Errorf("the lab quotes the restart log line %v, which lock/node.go does not write", quote)
	}
	// The Redis arguments the lab quotes are the compose file's.
	composeRedisArgs(t, service, nil) // fails unless service runs redis-server
	raw := regexp.MustCompile("`(--appendonly [^`]*)`").FindStringSubmatch(sec)
	if raw == nil {
		t.Fatal("the lab does not quote the nodes' --appendonly arguments")
	}
	var doc2 struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	_ = yaml.Unmarshal([]byte(read(t, "docker-compose.yml")), &doc2)
	if !strings.Contains(strings.Join(doc2.Services[service].Command, " "), raw[1]) {
		t.Errorf("the lab quotes %q; %s runs %q", raw[1], service, doc2.Services[service].Command)
	}

	// Run it: the compose node's arguments, on a free port in a temporary
	// directory, for each fsync policy the lab names.
	for _, fsync := range []string{"everysec", "always"} {
		t.Run(fsync, func(t *testing.T) {
			dir := t.TempDir()
			args := append(composeRedisArgs(t, service, map[string]string{"APPENDFSYNC": fsync}),
				"--port", freePort(t), "--dir", dir, "--bind", "127.0.0.1")
			if !slices.Contains(args, fsync) {
				t.Fatalf("APPENDFSYNC=%s does not reach the node: %q", fsync, args)
			}
			ctx := context.Background()
			n := startRedis(t, args)
			if err := n.rdb.Set(ctx, key, "me", 60*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			before := runID(t, n.rdb)
			n.stop(syscall.SIGKILL) // docker compose kill
			n = startRedis(t, args)
			ttl, err := n.rdb.PTTL(ctx, key).Result()
			if err != nil || ttl <= 0 || ttl >= 60*time.Second {
				t.Errorf("after a kill and a start, PTTL %v %v; the lab says it survives with its TTL running", ttl, err)
			}
			if runID(t, n.rdb) == before {
				t.Errorf("the run_id did not change across the restart: restart awareness could not see it")
			}
			// Lose the data: remove the append-only files, kill, start.
			if err := os.RemoveAll(filepath.Join(dir, "appendonlydir")); err != nil {
				t.Fatal(err)
			}
			n.stop(syscall.SIGKILL)
			n = startRedis(t, args)
			if ttl, err := n.rdb.PTTL(ctx, key).Result(); err != nil || ttl != -2 {
				t.Errorf("after losing the AOF, PTTL %v %v; the lab says -2 (gone)", ttl, err)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// operations.md.

// Flags, variables and Redis URLs quoted in operations.md are real.
func TestOperationsDoc(t *testing.T) {
	ops := read(t, "docs/operations.md")
	app, runner := binaries(t)
	af, lf := helpOf(t, app), helpOf(t, runner)
	for _, m := range regexp.MustCompile("`(-[a-z][a-z0-9-]*)").FindAllStringSubmatch(ops, -1) {
		name := strings.TrimPrefix(m[1], "-")
		if _, ok := af.takesValue[name]; ok {
			continue
		}
		if _, ok := lf.takesValue[name]; ok {
			continue
		}
		t.Errorf("operations.md quotes %s, a flag neither flashsale nor the load runner has", m[1])
	}
	for _, v := range regexp.MustCompile(`FLASHSALE_[A-Z0-9_]+`).FindAllString(ops, -1) {
		if !af.env[v] {
			t.Errorf("operations.md names $%s, which `flashsale -h` does not know", v)
		}
	}
	urls := regexp.MustCompile("`(rediss?://[^`]+)`").FindAllStringSubmatch(ops, -1)
	if len(urls) < 4 {
		t.Errorf("operations.md gives only %d Redis URLs", len(urls))
	}
	for _, m := range urls {
		u := m[1]
		o, err := redis.ParseURL(u)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		if strings.HasPrefix(u, "rediss://") != (o.TLSConfig != nil) {
			t.Errorf("%s: TLS %v", u, o.TLSConfig != nil)
		}
		if strings.Contains(u, "flashsale:s3cret@") && (o.Username != "flashsale" || o.Password != "s3cret") {
			t.Errorf("%s: user %q password %q", u, o.Username, o.Password)
		}
		if strings.Contains(u, "//:s3cret@") && (o.Username != "" || o.Password != "s3cret") {
			t.Errorf("%s: user %q password %q", u, o.Username, o.Password)
		}
	}
	// An unknown query parameter is refused, as the page says.
	if _, err := redis.ParseURL("redis://h:6379/0?no_such_option=1"); err == nil {
		t.Error("go-redis accepts an unknown URL option; operations.md says it is refused")
	}
	// The ACL the page shows is the example file's.
	acl := strings.TrimSpace(read(t, "deploy/redis/users.acl.example"))
	if !strings.Contains(ops, "```\n"+acl+"\n```") {
		t.Errorf("operations.md does not show deploy/redis/users.acl.example as it is:\n%s", acl)
	}
	// The figures the page quotes are the code's.
	for _, c := range []struct{ doc, file, code string }{
		{"TTL/20, at least 50 ms and at most TTL/3", "lock/lockers.go", "min(max(cfg.ttl/20, 50*time.Millisecond), cfg.ttl/3)"},
		{"drift = 1% of the TTL + 2 ms", "lock/redlock.go", "ttl/100 + 2*time.Millisecond"},
		{"extends itself every TTL/3", "lock/watchdog.go", "every := l.locker.cfg.ttl / 3"},
		{"at most 12 connections", "inventory/db.go", "SetMaxOpenConns(12)"},
		{"answer (within 2 s)", "handlers/ops.go", "context.WithTimeout(c.Request.Context(), 2*time.Second)"},
		{"`flashsale:events`", "handlers/stream.go", `namespace + "events"`},
		{"`flashsale:lock:sku:<SKU>`", "inventory/sale.go", `"sku:"+p.SKU`},
		{"`flashsale:lock:seat:<event>:<seat>`", "inventory/seats.go", `"seat:" + r.Event + ":" + r.Seat`},
		{"`flashsale:fence:sku:<SKU>`", "lock/lock.go", `fence: l.cfg.namespace + "fence:" + name`},
	} {
		if !strings.Contains(strings.Join(strings.Fields(ops), " "), c.doc) {
			t.Errorf("operations.md no longer says %q", c.doc)
		}
		if !strings.Contains(read(t, c.file), c.code) {
			t.Errorf("operations.md says %q, but %s no longer has %q", c.doc, c.file, c.code)
		}
	}
}

// Relative links of both guides lead to files that exist.
func TestLinks(t *testing.T) {
	for _, doc := range []string{"docs/workshop.md", "docs/operations.md"} {
		for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(read(t, doc), -1) {
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(doc), m[1])); err != nil {
				t.Errorf("%s links to %s: %v", doc, m[1], err)
			}
		}
	}
}
