package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"flashsale/internal/testsupport"
)

// The Dockerfile.

type instruction struct {
	cmd  string // upper case: FROM, RUN, ENV, …
	args string
}

type stage struct {
	from, name string
	ins        []instruction
}

// parseDockerfile splits a Dockerfile into stages of instructions, joining
// continuation lines and dropping comments.
// A FROM that names an ARG declared before the first FROM is read as that
// ARG's default: the image a plain `docker build` uses.
func parseDockerfile(text string) []stage {
	var stages []stage
	defaults := map[string]string{}
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "ARG" && len(stages) == 0 {
			name, def, _ := strings.Cut(in.args, "=")
			defaults[name] = def
			return
		}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{from: os.Expand(f[0], func(k string) string { return defaults[k] })}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) > 0 {
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

func stageNamed(stages []stage, name string) (stage, bool) {
	for _, s := range stages {
		if s.name == name {
			return s, true
		}
	}
	return stage{}, false
}

// envOf collects a stage's ENV KEY=VALUE pairs.
func envOf(s stage) map[string]string {
	out := map[string]string{}
	for _, in := range s.ins {
		if in.cmd != "ENV" {
			continue
		}
		for _, w := range shellWords(in.args) {
			if k, v, ok := strings.Cut(w, "="); ok {
				out[k] = v
			}
		}
	}
	return out
}

// shellWords splits a command line the way sh would for the simple quoting
// a Dockerfile uses (double and single quotes, backslash escapes).
func shellWords(s string) []string {
	var out []string
	var w strings.Builder
	in := false
	var quote rune
	for i := 0; i < len(s); i++ {
		c := rune(s[i])
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == '"' && c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
		case quote != 0:
			w.WriteRune(c)
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(c)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

// goBuilds are the `go build` command lines of a stage's RUN instructions,
// without the leading "go build".
func goBuilds(s stage) [][]string {
	var out [][]string
	for _, in := range s.ins {
		if in.cmd != "RUN" {
			continue
		}
		for _, part := range strings.Split(in.args, "&&") {
			w := shellWords(part)
			if len(w) >= 2 && w[0] == "go" && w[1] == "build" {
				out = append(out, w[2:])
			}
		}
	}
	return out
}

// buildTarget is the package a go build command line builds, and the output
// file it names.
func buildTarget(args []string) (pkg, output string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" && i+1 < len(args):
			output = args[i+1]
			i++
		case strings.HasPrefix(a, "-o="):
			output = strings.TrimPrefix(a, "-o=")
		case strings.HasPrefix(a, "-"):
			if !strings.Contains(a, "=") && slices.Contains([]string{"-ldflags", "-tags", "-gcflags", "-mod", "-p"}, a) {
				i++ // the flag's value is the next word
			}
		default:
			pkg = a
		}
	}
	return pkg, output
}

// built holds the binaries the Dockerfile builds, built here once with the
// Dockerfile's own go build lines and build-stage ENV (cgo on).
var built struct {
	once sync.Once
	dir  string
	bins map[string]string // by the base name of the Dockerfile's -o
	err  error
}

func binaries(t *testing.T) map[string]string {
	t.Helper()
	built.once.Do(func() {
		stages := parseDockerfile(read(t, "Dockerfile"))
		b, ok := stageNamed(stages, "build")
		if !ok {
			built.err = fmt.Errorf("the Dockerfile has no stage named build")
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "flashsale-deploy-test-"); built.err != nil {
			return
		}
		env := cleanEnv()
		for k, v := range envOf(b) {
			if k == "GOFLAGS" { // keep the flags go env already has (e.g. -buildvcs=false)
				cur, _ := exec.Command("go", "env", "GOFLAGS").Output()
				v = strings.TrimSpace(string(cur) + " " + v)
			}
			env = append(env, k+"="+v)
		}
		built.bins = map[string]string{}
		for _, args := range goBuilds(b) {
			pkg, out := buildTarget(args)
			name := filepath.Base(out)
			local := filepath.Join(built.dir, name)
			args = slices.Clone(args)
			for i := range args {
				if args[i] == out {
					args[i] = local
				}
			}
			cmd := exec.Command("go", append([]string{"build"}, args...)...)
			cmd.Dir, cmd.Env = root, env
			if msg, err := cmd.CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build %s (as in the Dockerfile): %v\n%s", pkg, err, msg)
				return
			}
			built.bins[name] = local
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bins
}

// help is what a binary's -h says: its flags and the FLASHSALE_* variables.
type help struct {
	flags map[string]bool
	env   map[string]bool
	text  string
}

var (
	flagLine = regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)
	envName  = regexp.MustCompile(`FLASHSALE_[A-Z0-9_]+`)
)

func helpOf(t *testing.T, bin string) help {
	t.Helper()
	out := testsupport.Help(t, bin, composeVars...)
	h := help{flags: map[string]bool{}, env: map[string]bool{}, text: out}
	for _, m := range flagLine.FindAllStringSubmatch(h.text, -1) {
		h.flags[m[1]] = true
	}
	for _, m := range envName.FindAllString(h.text, -1) {
		h.env[m] = true
	}
	if len(h.flags) < 5 {
		t.Fatalf("%s -h lists only %d flags:\n%s", bin, len(h.flags), out)
	}
	return h
}

func TestDockerfile(t *testing.T) {
	text := read(t, "Dockerfile")
	stages := parseDockerfile(text)
	goMod := read(t, "go.mod")
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(goMod)
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}

	b, ok := stageNamed(stages, "build")
	if !ok {
		t.Fatal("no build stage")
	}
	// cgo links against the builder's glibc: the builder must be the
	// runtime's Debian release, and the Go of go.mod.
	if want := "golang:" + goVersion[1] + "-bookworm"; b.from != want {
		t.Errorf("build stage FROM %s, want %s (go.mod's Go, the runtime's Debian)", b.from, want)
	}
	if envOf(b)["CGO_ENABLED"] != "1" {
		t.Errorf("build stage does not set CGO_ENABLED=1 (mattn/go-sqlite3 needs cgo)")
	}
	var pkgs []string
	for _, args := range goBuilds(b) {
		pkg, out := buildTarget(args)
		pkgs = append(pkgs, pkg)
		if out == "" {
			t.Errorf("go build %s names no -o output", pkg)
		}
	}
	sort.Strings(pkgs)
	if want := []string{".", "./loadtest/cmd/loadtest"}; !slices.Equal(pkgs, want) {
		t.Errorf("the Dockerfile builds %q, want %q", pkgs, want)
	}

	rt, ok := stageNamed(stages, "runtime")
	if !ok {
		t.Fatal("no runtime stage")
	}
	if rt.from != "debian:bookworm-slim" {
		t.Errorf("runtime FROM %s, want debian:bookworm-slim (glibc, as the builder)", rt.from)
	}
	for _, in := range rt.ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "redis-server") {
			t.Errorf("the runtime installs redis-server; the app is always given -redis in a container")
		}
	}

	// Every stage the compose file builds exists, ends as a non-root user
	// and starts the right binary.
	for target, entry := range map[string]string{"app": "flashsale", "loadtest": "loadtest-entrypoint"} {
		s, ok := stageNamed(stages, target)
		if !ok {
			t.Errorf("no stage %q (docker-compose.yml builds it)", target)
			continue
		}
		user := ""
		for _, chain := range stageChain(stages, s) {
			for _, in := range chain.ins {
				if in.cmd == "USER" {
					user = in.args
				}
			}
		}
		if user == "" || user == "root" || user == "0" {
			t.Errorf("stage %s runs as %q, want a non-root user", target, user)
		}
		var ep string
		for _, in := range s.ins {
			if in.cmd == "ENTRYPOINT" {
				ep = in.args
			}
		}
		if !strings.Contains(ep, `"`+entry+`"`) {
			t.Errorf("stage %s ENTRYPOINT %s, want %s", target, ep, entry)
		}
	}
	if last := stages[len(stages)-1]; last.name != "app" {
		t.Errorf("the last stage is %q; a plain docker build should give the app", last.name)
	}

	// COPY sources from the context exist and are not excluded; secrets
	// and local leftovers are.
	ignore := read(t, ".dockerignore")
	for _, must := range []string{".git", ".env", "out"} {
		if !slices.Contains(strings.Fields(ignore), must) {
			t.Errorf(".dockerignore does not exclude %s", must)
		}
	}
	for _, s := range stages {
		for _, in := range s.ins {
			if in.cmd != "COPY" || strings.Contains(in.args, "--from=") {
				continue
			}
			w := shellWords(in.args)
			for _, src := range w[:len(w)-1] {
				if src == "." {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("COPY %s: %v", src, err)
				}
				for _, pat := range strings.Fields(ignore) {
					if ok, _ := filepath.Match(strings.TrimPrefix(pat, "/"), src); ok {
						t.Errorf("COPY %s, but .dockerignore excludes it (%s)", src, pat)
					}
				}
			}
		}
	}
	// The entrypoint is valid sh.
	if out, err := exec.Command("sh", "-n", filepath.Join(root, "deploy/loadtest/entrypoint.sh")).CombinedOutput(); err != nil {
		t.Errorf("sh -n deploy/loadtest/entrypoint.sh: %v\n%s", err, out)
	}
	// The Dockerfile's build lines build, here, with cgo.
	bins := binaries(t)
	for _, name := range []string{"flashsale", "loadtest"} {
		if bins[name] == "" {
			t.Errorf("the Dockerfile builds no %s binary (got %v)", name, bins)
		}
	}
}

// stageChain is s and the stages it is built FROM, base first.
func stageChain(stages []stage, s stage) []stage {
	chain := []stage{s}
	for {
		base, ok := stageNamed(stages, chain[0].from)
		if !ok {
			return chain
		}
		chain = append([]stage{base}, chain...)
	}
}
