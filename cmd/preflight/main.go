// Command preflight checks that a laptop can run the workshop and builds
// everything it will need, before the room's network is shared by twenty
// people: the Go version, the C compiler the SQLite driver needs, the Redis
// server the load runner starts (7 or newer), the optional tools and whether
// a Docker engine answers, whether a font covers Chinese (the pages in
// 中文 show empty boxes without one), whether the storefront's port is free (a note,
// not a failure: another -addr does as well), and then `go build ./...`
// and `go test -run '^$' ./...` (which downloads every module and compiles
// every package and test once); last, a smoke run: the load runner starts
// its Redis nodes and app instances and runs two cells, so the room knows
// before the day that a lab runs. It says in words what is missing and how
// to get it, and exits 1 when something required is.
//
//	go run ./cmd/preflight              # from the repository root
//	go run ./cmd/preflight -build=false # only the checks
//	go run ./cmd/preflight -smoke=false # the checks and the build, no cells
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], system(), os.Stdout, os.Stderr))
}

// Level is how much a failed check matters.
type Level int

// Levels of a check.
const (
	// Required: the labs cannot run without it; preflight exits 1.
	Required Level = iota
	// Optional: one lab variant or the test suite needs it.
	Optional
)

// Check is one thing preflight looked at.
type Check struct {
	Name  string
	OK    bool
	Level Level
	// Says is what was found, or what is missing and how to get it.
	Says string
}

// Env is what the checks ask of the machine; tests give a fake one.
type Env struct {
	// GoVersion is the running toolchain's version ("go1.26.8").
	GoVersion string
	// GoMod is the text of the module's go.mod.
	GoMod func() (string, error)
	// LookPath finds a program on PATH.
	LookPath func(string) (string, error)
	// Output runs a program and returns its combined output.
	Output func(ctx context.Context, name string, args ...string) (string, error)
	// Listen tries to listen on a TCP address and frees it again.
	Listen func(addr string) error
}

// system is the real machine.
func system() Env {
	return Env{
		GoVersion: runtime.Version(),
		GoMod:     func() (string, error) { b, err := os.ReadFile("go.mod"); return string(b), err },
		LookPath:  exec.LookPath,
		Output: func(ctx context.Context, name string, args ...string) (string, error) {
			b, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
			return string(b), err
		},
		Listen: func(addr string) error {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			return l.Close()
		},
	}
}

func run(ctx context.Context, args []string, env Env, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	fs.SetOutput(stderr)
	build := fs.Bool("build", true, "also download every module and compile every package and test (go build ./..., go test -run '^$' ./...)")
	smoke := fs.Bool("smoke", true, "after the build, run two cells of the load runner (none and lua under clean, -quick)")
	addr := fs.String("addr", "127.0.0.1:8080", "the address the storefront will listen on (go run . -addr)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	checks := Checks(ctx, env, *addr)
	if *build && !failed(checks, Required) {
		checks = append(checks, Build(ctx, env)...)
	}
	if *build && *smoke && !failed(checks, Required) {
		checks = append(checks, Smoke(ctx, env))
	}
	for _, c := range checks {
		mark := "ok     "
		switch {
		case !c.OK && c.Level == Required:
			mark = "MISSING"
		case !c.OK:
			mark = "note   "
		}
		fmt.Fprintf(stdout, "%s %-16s %s\n", mark, c.Name, c.Says)
	}
	if failed(checks, Required) {
		fmt.Fprintln(stdout, "\nNot ready: fix the MISSING lines above and run go run ./cmd/preflight again.")
		return 1
	}
	fmt.Fprintln(stdout, "\nReady for the workshop (docs/workshop.md; the handout is docs/handout.md). The notes above only matter for what they name.")
	return 0
}

func failed(checks []Check, l Level) bool {
	for _, c := range checks {
		if !c.OK && c.Level == l {
			return true
		}
	}
	return false
}

// goLine is go.mod's go directive.
var goLine = regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`)

// Checks looks at the machine without building anything.
func Checks(ctx context.Context, env Env, addr string) []Check {
	var out []Check

	// Go: at least the version go.mod names.
	c := Check{Name: "Go", Level: Required}
	mod, err := env.GoMod()
	m := goLine.FindStringSubmatch(mod)
	have := goLine.FindStringSubmatch("go " + strings.TrimPrefix(env.GoVersion, "go"))
	switch {
	case err != nil || m == nil:
		c.Says = "no go.mod here: run preflight from the repository root (go run ./cmd/preflight)"
	case have == nil || older(have, m):
		c.Says = fmt.Sprintf("%s is older than the go %s.%s that go.mod needs: install Go %s.%s or newer from https://go.dev/dl/", env.GoVersion, m[1], m[2], m[1], m[2])
	default:
		c.OK, c.Says = true, fmt.Sprintf("%s (go.mod needs %s.%s or newer)", env.GoVersion, m[1], m[2])
	}
	out = append(out, c)

	// The SQLite driver (github.com/mattn/go-sqlite3) is C, built with cgo.
	c = Check{Name: "C compiler", Level: Required}
	cgo, _ := env.Output(ctx, "go", "env", "CGO_ENABLED")
	cc, _ := env.Output(ctx, "go", "env", "CC")
	cc = strings.Fields(strings.TrimSpace(cc) + " gcc")[0]
	switch path, err := env.LookPath(cc); {
	case strings.TrimSpace(cgo) != "1":
		c.Says = "cgo is off (go env CGO_ENABLED is not 1): the SQLite driver is C; set CGO_ENABLED=1 and install a C compiler (sudo apt-get install gcc)"
	case err != nil:
		c.Says = fmt.Sprintf("%s is not on PATH: the SQLite driver (mattn/go-sqlite3) is C, built with cgo; sudo apt-get install gcc (macOS: xcode-select --install)", cc)
	default:
		c.OK, c.Says = true, path+" (cgo, for the SQLite driver)"
	}
	out = append(out, c)

	out = append(out,
		redisCheck(tool(ctx, env, "redis-server", Required, []string{"--version"},
			"the load runner and the workshop page's node scenarios start real Redis nodes; sudo apt-get install redis-server (macOS: brew install redis)")),
		tool(ctx, env, "redis-cli", Optional, nil,
			"only Lab 9 (persistence) types Redis commands by hand; it comes with Debian's redis-server (package redis-tools)"),
		tool(ctx, env, "redis-sentinel", Optional, nil,
			"not needed by the labs: the failover lab runs redis-server --sentinel; CI installs Debian's redis-sentinel package"),
		tool(ctx, env, "chromium", Optional, nil,
			"only the browser tests drive it; the workshop page works in any browser; sudo apt-get install chromium"),
		composeCheck(ctx, env),
		FontCheck(ctx, env),
	)

	// Only `go run .` with its default address needs the port: the load
	// runner and the tests pick free ports, and another -addr does as well.
	c = Check{Name: "port " + addr, Level: Optional}
	if err := env.Listen(addr); err != nil {
		_, port, _ := net.SplitHostPort(addr)
		c.Says = fmt.Sprintf("in use (%v): start the storefront with go run . -addr 127.0.0.1:8090 (and open that port), or stop what listens there "+
			"(Linux: ss -ltnp 'sport = :%s'; macOS: lsof -nP -iTCP:%s -sTCP:LISTEN); the load runner and the tests pick free ports themselves", err, port, port)
	} else {
		c.OK, c.Says = true, "free for go run . (the load runner and the tests pick free ports themselves)"
	}
	return append(out, c)
}

// older reports whether version a (major, minor from goLine) is below b.
func older(a, b []string) bool {
	am, _ := strconv.Atoi(a[1])
	an, _ := strconv.Atoi(a[2])
	bm, _ := strconv.Atoi(b[1])
	bn, _ := strconv.Atoi(b[2])
	return am < bm || am == bm && an < bn
}

// tool checks that name is on PATH, and with versionArgs says its version.
func tool(ctx context.Context, env Env, name string, l Level, versionArgs []string, missing string) Check {
	c := Check{Name: name, Level: l}
	path, err := env.LookPath(name)
	if err != nil {
		c.Says = "not on PATH: " + missing
		return c
	}
	c.OK, c.Says = true, path
	if versionArgs != nil {
		if v, err := env.Output(ctx, path, versionArgs...); err == nil {
			c.Says += ": " + strings.TrimSpace(v)
		}
	}
	return c
}

// redisVersion is the version redis-server --version reports ("v=7.0.15").
var redisVersion = regexp.MustCompile(`v=(\d+)\.(\d+)`)

// redisCheck refuses a redis-server older than 7, whose replies and
// commands the labs do not expect.
func redisCheck(c Check) Check {
	if !c.OK {
		return c
	}
	m := redisVersion.FindStringSubmatch(c.Says)
	if m == nil {
		c.Says += " (version unknown: the labs need 7 or newer)"
		return c
	}
	if major, _ := strconv.Atoi(m[1]); major < 7 {
		c.OK = false
		c.Says = fmt.Sprintf("%s is Redis %s.%s, older than the 7 the labs need: sudo apt-get install redis-server from a newer release (macOS: brew upgrade redis)", c.Says, m[1], m[2])
	}
	return c
}

// composeCheck looks for Docker Compose and for a Docker engine that
// answers: the compose client alone runs nothing. Only the compose stack
// needs them; every lab runs without.
func composeCheck(ctx context.Context, env Env) Check {
	c := Check{Name: "docker compose", Level: Optional}
	client := ""
	if _, err := env.Output(ctx, "docker", "compose", "version"); err == nil {
		client = "docker compose"
	} else if path, err := env.LookPath("docker-compose"); err == nil {
		client = path
	}
	if client == "" {
		c.Says = "not found: only the compose stack (docs/operations.md) needs it; every lab runs without"
		return c
	}
	engine, err := env.Output(ctx, "docker", "info", "--format", "{{.ServerVersion}}")
	if err != nil {
		c.Says = fmt.Sprintf("%s is installed, but no Docker engine answers (docker info: %s): start Docker (Docker Desktop, or sudo systemctl start docker) before using the compose stack; every lab runs without", client, lastLines(engine, 1))
		return c
	}
	c.OK, c.Says = true, fmt.Sprintf("%s, Docker engine %s (the compose stack, docs/operations.md)", client, strings.TrimSpace(engine))
	return c
}

// Build downloads every module and compiles every package and test, so
// that no lab waits for the network or the compiler.
func Build(ctx context.Context, env Env) []Check {
	var out []Check
	for _, step := range [][]string{
		{"go", "mod", "download"},
		{"go", "build", "./..."},
		{"go", "test", "-count=1", "-run", "^$", "./..."},
	} {
		c := Check{Name: strings.Join(step[:2], " "), Level: Required}
		if text, err := env.Output(ctx, step[0], step[1:]...); err != nil {
			c.Says = fmt.Sprintf("%s failed (%v): %s", strings.Join(step, " "), err, lastLines(text, 5))
			out = append(out, c)
			break
		}
		c.OK, c.Says = true, strings.Join(step, " ")
		out = append(out, c)
	}
	return out
}

// smokeSummary is the load runner's last count: "2 cells: 0 bugs (…), 1 no-demo (…), 0 errors".
var smokeSummary = regexp.MustCompile(`(\d+) bugs .*?(\d+) no-demo .*?(\d+) errors`)

// Smoke runs the first lab's two cells the way a lab does, with the quick
// settings: the load runner starts its Redis nodes and app instances, and
// lua must hold. A none that happens to hold is a race that did not land,
// not a broken laptop, so only a bug or an error fails the check.
func Smoke(ctx context.Context, env Env) Check {
	c := Check{Name: "smoke run", Level: Required}
	out, err := os.MkdirTemp("", "preflight-smoke-")
	if err != nil {
		c.Says = fmt.Sprintf("no temporary directory for the run: %v", err)
		return c
	}
	defer os.RemoveAll(out)
	args := []string{"run", "./loadtest/cmd/loadtest", "-cells", "none/clean,lua/clean", "-quick", "-progress=false", "-out", out}
	text, err := env.Output(ctx, "go", args...)
	m := smokeSummary.FindStringSubmatch(text)
	switch {
	case err != nil || m == nil || m[1] != "0" || m[3] != "0":
		c.Says = fmt.Sprintf("go %s failed (%v): %s", strings.Join(args[:2], " "), err, lastLines(text, 5))
	case m[2] != "0":
		c.OK, c.Says = true, "none and lua ran under clean; lua held, none happened to hold this time (a race that did not land: Lab 1 runs it again)"
	default:
		c.OK, c.Says = true, "none broke and lua held under clean, on 5 Redis nodes and 3 app instances the load runner started"
	}
	return c
}

// lastLines is the end of a command's output, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
