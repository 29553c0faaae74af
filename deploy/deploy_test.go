package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/redis/go-redis/v9"

	"flashsale/lock"
)

// root is the module root, where docker-compose.yml and the Dockerfile live.
const root = ".."

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// ---------------------------------------------------------------------------
// Tools: a test that needs one skips without it, except in CI (CI=true),
// where .ci/run installs it and its absence is a failure.

func inCI() bool { return os.Getenv("CI") == "true" }

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

// cleanEnv is the test's environment without anything that would change what
// the compose file or the binaries see (FLASHSALE_*, the compose variables).
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FLASHSALE_") || strings.HasPrefix(k, "LOADTEST_") || strings.HasPrefix(k, "COMPOSE_") ||
			slices.Contains([]string{"APPENDFSYNC", "POSTGRES_PASSWORD", "PUBLISH_HOST"}, k) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// ---------------------------------------------------------------------------
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
func parseDockerfile(text string) []stage {
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{from: f[0]}
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
	cmd := exec.Command(bin, "-h")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -h: %v\n%s", bin, err, out)
	}
	h := help{flags: map[string]bool{}, env: map[string]bool{}, text: string(out)}
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

// ---------------------------------------------------------------------------
// The compose file, read as docker-compose reads it: YAML with anchors and
// merge keys, then ${VAR}, ${VAR:-default} and ${VAR:?error} interpolated.

var interpolation = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

func interpolate(s string, env map[string]string) (string, error) {
	var errs []string
	out := interpolation.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sm := interpolation.FindStringSubmatch(m)
		name, op, arg := sm[1], sm[2], sm[3]
		if name == "" {
			name = sm[4]
		}
		v, set := env[name]
		switch op {
		case ":-":
			if v == "" {
				return arg
			}
		case "-":
			if !set {
				return arg
			}
		case ":?":
			if v == "" {
				errs = append(errs, name+": "+arg)
			}
		case "?":
			if !set {
				errs = append(errs, name+": "+arg)
			}
		}
		return v
	})
	if errs != nil {
		return "", fmt.Errorf("required variable missing: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

func interpolateAll(v any, env map[string]string) (any, error) {
	switch x := v.(type) {
	case string:
		return interpolate(x, env)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			var err error
			if out[i], err = interpolateAll(x[i], env); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			var err error
			if out[k], err = interpolateAll(e, env); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

type service map[string]any

func loadCompose(t *testing.T, env map[string]string) (map[string]service, error) {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal([]byte(read(t, "docker-compose.yml")), &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	doc, err := interpolateAll(doc, env)
	if err != nil {
		return nil, err
	}
	raw, _ := doc.(map[string]any)["services"].(map[string]any)
	out := map[string]service{}
	for name, s := range raw {
		out[name], _ = s.(map[string]any)
	}
	return out, nil
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return shellWords(x)
	case []any:
		out := make([]string, len(x))
		for i := range x {
			out[i] = str(x[i])
		}
		return out
	}
	return nil
}

func (s service) env() map[string]string {
	out := map[string]string{}
	switch x := s["environment"].(type) {
	case map[string]any:
		for k, v := range x {
			out[k] = str(v)
		}
	case []any:
		for _, kv := range x {
			k, v, _ := strings.Cut(str(kv), "=")
			out[k] = v
		}
	}
	return out
}

// dependsOn is each dependency and its condition ("service_started" for the
// short form).
func (s service) dependsOn() map[string]string {
	out := map[string]string{}
	switch x := s["depends_on"].(type) {
	case []any:
		for _, d := range x {
			out[str(d)] = "service_started"
		}
	case map[string]any:
		for d, c := range x {
			m, _ := c.(map[string]any)
			out[d] = str(m["condition"])
		}
	}
	return out
}

type port struct{ hostIP, published, target string }

func (s service) ports() []port {
	var out []port
	list, _ := s["ports"].([]any)
	for _, p := range list {
		switch x := p.(type) {
		case map[string]any:
			out = append(out, port{str(x["host_ip"]), str(x["published"]), str(x["target"])})
		default:
			f := strings.Split(strings.TrimSuffix(str(x), "/tcp"), ":")
			switch len(f) {
			case 3:
				out = append(out, port{f[0], f[1], f[2]})
			case 2:
				out = append(out, port{"", f[0], f[1]})
			case 1:
				out = append(out, port{"", "", f[0]})
			}
		}
	}
	return out
}

func (s service) healthcheck() []string {
	h, _ := s["healthcheck"].(map[string]any)
	return strs(h["test"])
}

func (s service) profiles() []string { return strs(s["profiles"]) }

func (s service) buildTarget() string {
	b, _ := s["build"].(map[string]any)
	return str(b["target"])
}

var composeEnv = map[string]string{"FLASHSALE_ADMIN_TOKEN": "deploy-test-token"}

func appServices(svcs map[string]service) []string {
	var out []string
	for name := range svcs {
		if strings.HasPrefix(name, "app-") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func TestComposeServices(t *testing.T) {
	svcs, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	var redisNodes []string
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("redis-%d", i)
		redisNodes = append(redisNodes, name)
		s, ok := svcs[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		if img := str(s["image"]); !strings.HasPrefix(img, "redis:7") {
			t.Errorf("%s image %q, want redis:7", name, img)
		}
		cmd := strings.Join(strs(s["command"]), " ")
		for _, want := range []string{"--appendonly yes", "--appendfsync everysec", "--notify-keyspace-events Kgx", `--save `} {
			if !strings.Contains(cmd, want) {
				t.Errorf("%s command %q lacks %q", name, cmd, want)
			}
		}
		if strings.Contains(cmd, "replicaof") || strings.Contains(cmd, "slaveof") {
			t.Errorf("%s is a replica; Redlock needs independent masters", name)
		}
		if hc := strings.Join(s.healthcheck(), " "); !strings.Contains(hc, "redis-cli ping") {
			t.Errorf("%s healthcheck %q, want redis-cli ping", name, hc)
		}
	}
	if pg, ok := svcs["postgres"]; !ok {
		t.Error("no service postgres")
	} else if hc := strings.Join(pg.healthcheck(), " "); !strings.Contains(hc, "pg_isready") {
		t.Errorf("postgres healthcheck %q, want pg_isready", hc)
	}

	apps := appServices(svcs)
	if len(apps) != 3 {
		t.Errorf("app services %v, want three replicas", apps)
	}
	var wantRedis []string
	for _, n := range redisNodes {
		wantRedis = append(wantRedis, "redis://"+n+":6379")
	}
	for _, name := range apps {
		s := svcs[name]
		env := s.env()
		if s.buildTarget() != "app" {
			t.Errorf("%s builds target %q, want app", name, s.buildTarget())
		}
		if got := strings.Split(env["FLASHSALE_REDIS"], ","); !slices.Equal(got, wantRedis) {
			t.Errorf("%s FLASHSALE_REDIS %q, want the five nodes %q", name, got, wantRedis)
		}
		if db := env["FLASHSALE_DB"]; !strings.HasPrefix(db, "postgres://") || !strings.Contains(db, "@postgres:5432/") {
			t.Errorf("%s FLASHSALE_DB %q, want postgres://…@postgres:5432/…", name, db)
		}
		if env["FLASHSALE_ADDR"] != "0.0.0.0:8080" {
			t.Errorf("%s FLASHSALE_ADDR %q, want 0.0.0.0:8080", name, env["FLASHSALE_ADDR"])
		}
		if env["FLASHSALE_ADMIN_TOKEN"] != composeEnv["FLASHSALE_ADMIN_TOKEN"] {
			t.Errorf("%s does not take FLASHSALE_ADMIN_TOKEN from the environment", name)
		}
		deps := s.dependsOn()
		for _, d := range append([]string{"postgres"}, redisNodes...) {
			if deps[d] != "service_healthy" {
				t.Errorf("%s depends on %s with %q, want condition service_healthy", name, d, deps[d])
			}
		}
		if hc := strings.Join(s.healthcheck(), " "); !strings.Contains(hc, "/readyz") {
			t.Errorf("%s healthcheck %q does not ask /readyz", name, hc)
		}
	}
	if p := svcs["app-1"].ports(); len(p) != 1 || p[0].published != "8080" || p[0].target != "8080" || p[0].hostIP != "127.0.0.1" {
		t.Errorf("app-1 ports %+v, want 127.0.0.1:8080:8080", p)
	}

	// Ports only where a person needs them: the apps and Prometheus.
	for name, s := range svcs {
		if len(s.ports()) > 0 && !strings.HasPrefix(name, "app-") && name != "prometheus" {
			t.Errorf("%s publishes %+v; only the apps and Prometheus need a port", name, s.ports())
		}
	}

	lt, ok := svcs["loadtest"]
	if !ok {
		t.Fatal("no loadtest service")
	}
	if !slices.Equal(lt.profiles(), []string{"loadtest"}) {
		t.Errorf("loadtest profiles %v, want [loadtest]", lt.profiles())
	}
	if lt.buildTarget() != "loadtest" {
		t.Errorf("loadtest builds target %q", lt.buildTarget())
	}
	env := lt.env()
	var targets []string
	for _, a := range strings.Fields(env["LOADTEST_APPS"]) {
		host, _, _ := strings.Cut(a, ":")
		targets = append(targets, host)
		if lt.dependsOn()[host] != "service_healthy" {
			t.Errorf("loadtest attacks %s but does not wait for it to be healthy", host)
		}
	}
	if !slices.Equal(targets, apps) {
		t.Errorf("loadtest attacks %v, want every app replica %v", targets, apps)
	}
	var scanned []string
	for _, a := range strings.Fields(env["LOADTEST_REDIS"]) {
		host, _, _ := strings.Cut(a, ":")
		scanned = append(scanned, host)
	}
	if !slices.Equal(scanned, redisNodes) {
		t.Errorf("loadtest scans Redis %v, want %v", scanned, redisNodes)
	}
	if env["LOADTEST_LOCK_TTL"] != svcs["app-1"].env()["FLASHSALE_LOCK_TTL"] {
		t.Errorf("loadtest LOADTEST_LOCK_TTL %q, but the apps' TTL is %q", env["LOADTEST_LOCK_TTL"], svcs["app-1"].env()["FLASHSALE_LOCK_TTL"])
	}

	// The variables a person sets reach the services.
	set, err := loadCompose(t, map[string]string{"FLASHSALE_ADMIN_TOKEN": "x", "APPENDFSYNC": "always", "FLASHSALE_LOCK_TTL": "750ms"})
	if err != nil {
		t.Fatal(err)
	}
	if cmd := strings.Join(strs(set["redis-3"]["command"]), " "); !strings.Contains(cmd, "--appendfsync always") {
		t.Errorf("APPENDFSYNC=always does not reach redis-3: %q", cmd)
	}
	if set["app-2"].env()["FLASHSALE_LOCK_TTL"] != "750ms" || set["loadtest"].env()["LOADTEST_LOCK_TTL"] != "750ms" {
		t.Errorf("FLASHSALE_LOCK_TTL does not reach app-2 and the load runner alike")
	}
	// The admin token is required, not defaulted to something guessable.
	if _, err := loadCompose(t, map[string]string{}); err == nil || !strings.Contains(err.Error(), "FLASHSALE_ADMIN_TOKEN") {
		t.Errorf("without FLASHSALE_ADMIN_TOKEN the compose file gave %v, want an error naming it", err)
	}
}

// The compose file uses only flags and variables the binaries know.
func TestComposeMatchesFlags(t *testing.T) {
	bins := binaries(t)
	app, lt := helpOf(t, bins["flashsale"]), helpOf(t, bins["loadtest"])

	for _, f := range []string{"docker-compose.yml", "Dockerfile", "deploy/loadtest/entrypoint.sh"} {
		for _, v := range envName.FindAllString(read(t, f), -1) {
			if !app.env[v] {
				t.Errorf("%s uses $%s, which `flashsale -h` does not know (it knows %v)", f, v, keys(app.env))
			}
		}
	}
	// Every FLASHSALE_* variable the apps get is also a flag, so it parses:
	// start-up would refuse a bad one (TestComposeEnvironmentRunsTheApp).
	svcs, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	// The load runner's arguments: the compose command, and the flags the
	// entrypoint adds.
	args := strs(svcs["loadtest"]["command"])
	entry := read(t, "deploy/loadtest/entrypoint.sh")
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:exec loadtest|set --)\s+(.*)$`).FindAllStringSubmatch(entry, -1) {
		args = append(args, shellWords(m[1])...)
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !lt.flags[name] {
			t.Errorf("the loadtest service passes -%s, which `loadtest -h` does not know", name)
		}
	}
	for _, must := range []string{"-targets", "-redis", "-lock-ttl"} {
		if !slices.Contains(args, must) {
			t.Errorf("the loadtest service never passes %s", must)
		}
	}
	// The LOADTEST_* variables set in the compose file are those the
	// entrypoint reads.
	for k := range svcs["loadtest"].env() {
		if strings.HasPrefix(k, "LOADTEST_") && !strings.Contains(entry, "$"+k) && !strings.Contains(entry, "${"+k) {
			t.Errorf("the loadtest service sets %s, which the entrypoint never reads", k)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// docker-compose itself parses the file (every profile), with the defaults
// and with the variables a person sets.
func TestComposeConfig(t *testing.T) {
	// Debian's docker-compose (v1.29), or the Compose v2 plugin if that is
	// what this machine has.
	tool := []string{"docker-compose"}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		if exec.Command("docker", "compose", "version").Run() == nil {
			tool = []string{"docker", "compose"}
		} else {
			need(t, "docker-compose", "validate docker-compose.yml")
		}
	}
	// An empty --env-file: a developer's .env must not change what is tested.
	noEnv := filepath.Join(t.TempDir(), "empty.env")
	if err := os.WriteFile(noEnv, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(extra ...string) (string, error) {
		args := append(tool[1:], "-f", filepath.Join(root, "docker-compose.yml"), "--env-file", noEnv,
			"--profile", "loadtest", "--profile", "monitoring", "config")
		cmd := exec.Command(tool[0], args...)
		cmd.Env = append(cleanEnv(), extra...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return stderr.String(), err
		}
		return string(out), nil
	}
	out, err := run("FLASHSALE_ADMIN_TOKEN=t0ken")
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	var doc struct {
		Services map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("docker-compose config output: %v", err)
	}
	ours, _ := loadCompose(t, map[string]string{"FLASHSALE_ADMIN_TOKEN": "t0ken"})
	var got, want []string
	for name := range doc.Services {
		got = append(got, name)
	}
	for name := range ours {
		want = append(want, name)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("docker-compose sees services %v, this test's reading %v", got, want)
	}
	if !strings.Contains(out, "t0ken") {
		t.Errorf("the admin token did not reach the resolved config")
	}
	if out, err := run("FLASHSALE_ADMIN_TOKEN=t", "APPENDFSYNC=always", "PUBLISH_HOST=0.0.0.0"); err != nil {
		t.Errorf("docker-compose config with APPENDFSYNC=always: %v\n%s", err, out)
	} else if !strings.Contains(out, "always") {
		t.Errorf("APPENDFSYNC=always is not in the resolved config")
	}
	if out, err := run(); err == nil || !strings.Contains(out, "FLASHSALE_ADMIN_TOKEN") {
		t.Errorf("docker-compose config without FLASHSALE_ADMIN_TOKEN: err %v, output %q; want a refusal naming it", err, out)
	}
}

// ---------------------------------------------------------------------------
// The app, started with the compose file's environment.

type app struct {
	base   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	token  string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startApp runs the flashsale binary with env on a free loopback port and
// waits for /readyz. It is stopped with SIGTERM, by PID, when the test ends
// (the app then stops the Redis nodes it started).
func startApp(t *testing.T, env map[string]string) *app {
	t.Helper()
	bin := binaries(t)["flashsale"]
	cmd := exec.Command(bin)
	cmd.Env = cleanEnv()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	a := &app{cmd: cmd, stderr: &lockedBuffer{}, token: env["FLASHSALE_ADMIN_TOKEN"]}
	cmd.Stderr = a.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				listening <- u
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the app did not stop within 30s of SIGTERM")
		}
	})
	select {
	case a.base = <-listening:
	case <-exited:
		t.Fatalf("the app exited at start-up:\n%s", a.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("the app did not listen within 60s:\n%s", a.stderr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, _ := a.do(t, "GET", "/readyz", nil, nil)
		if code == http.StatusOK {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz answers %d after 30s:\n%s", code, a.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (a *app) do(t *testing.T, method, path string, body any, hdr map[string]string) (int, []byte, error) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(path, "/api/admin/") {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (a *app) must(t *testing.T, method, path string, body any, hdr map[string]string, want int) []byte {
	t.Helper()
	code, b, err := a.do(t, method, path, body, hdr)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %v %s, want %d\n%s", method, path, code, err, b, want, a.stderr)
	}
	return b
}

// composeAppEnv is app-1's environment from the compose file, made to run
// here: a loopback port, a SQLite file instead of the postgres service, and
// no -redis, so the app starts its own Redis nodes.
func composeAppEnv(t *testing.T, overrides map[string]string) map[string]string {
	t.Helper()
	svcs, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	env := svcs["app-1"].env()
	env["FLASHSALE_ADDR"] = "127.0.0.1:0"
	env["FLASHSALE_DB"] = filepath.Join(t.TempDir(), "sale.db")
	env["FLASHSALE_REDIS"] = ""
	env["FLASHSALE_SHUTDOWN_TIMEOUT"] = "5s"
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

type product struct {
	SKU   string `json:"sku"`
	Stock int64  `json:"stock"`
}

func products(t *testing.T, a *app) []product {
	t.Helper()
	var ps []product
	if err := json.Unmarshal(a.must(t, "GET", "/api/products", nil, nil, 200), &ps); err != nil || len(ps) == 0 {
		t.Fatalf("products: %v %v", ps, err)
	}
	return ps
}

// scrape is the app's /metrics: every sample name with its label names, and
// the type of every family.
type scrape struct {
	samples  map[string]map[string]bool // sample name → label names
	families map[string]string          // family name → type
	values   map[string]map[string]bool // label name → values seen (all samples)
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func scrapeMetrics(t *testing.T, a *app) scrape {
	t.Helper()
	body := a.must(t, "GET", "/metrics", nil, nil, 200)
	s := scrape{samples: map[string]map[string]bool{}, families: map[string]string{}, values: map[string]map[string]bool{}}
	for _, line := range strings.Split(string(body), "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			w := strings.Fields(f)
			s.families[w[0]] = w[1]
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if s.samples[m[1]] == nil {
			s.samples[m[1]] = map[string]bool{}
		}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.samples[m[1]][p[1]] = true
			if s.values[p[1]] == nil {
				s.values[p[1]] = map[string]bool{}
			}
			s.values[p[1]][p[2]] = true
		}
	}
	return s
}

// family is the metric family a sample name belongs to.
func (s scrape) family(name string) string {
	for _, suf := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suf); ok && (s.families[base] == "histogram" || s.families[base] == "summary") {
			return base
		}
	}
	return name
}

// familyLabels are the label names of a family's samples, without le.
func (s scrape) familyLabels(fam string) []string {
	set := map[string]bool{}
	for name, labels := range s.samples {
		if s.family(name) != fam {
			continue
		}
		for l := range labels {
			if l != "le" && l != "quantile" {
				set[l] = true
			}
		}
	}
	return keys(set)
}

// exerciseApp makes the app export every metric it has: a sale under every
// variant, a fault that fires, a seat grab, the audit, and a lease the
// watchdog loses (its lock key removed by a reset while the holder works).
func exerciseApp(t *testing.T, a *app) {
	t.Helper()
	a.must(t, "GET", "/healthz", nil, nil, 200)
	a.must(t, "GET", "/api", nil, nil, 200)
	ps := products(t, a)
	a.must(t, "PUT", "/api/admin/faults", map[string]any{
		"seed": 1, "work_ms": 0,
		"faults": []map[string]any{{"point": "in-critical-section", "action": "pause", "p": 1, "ms": 1}},
	}, nil, 200)
	for i, v := range lock.Names() {
		a.must(t, "POST", "/api/orders", map[string]any{"sku": ps[0].SKU, "qty": 1, "user": fmt.Sprintf("u%d", i)},
			map[string]string{"X-Lock-Variant": v}, 201)
	}
	a.must(t, "PUT", "/api/admin/faults", map[string]any{"seed": 1, "work_ms": 1500}, nil, 200)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = a.do(t, "POST", "/api/orders", map[string]any{"sku": ps[0].SKU, "qty": 1, "user": "slow"},
			map[string]string{"X-Lock-Variant": "lua"})
	}()
	time.Sleep(300 * time.Millisecond)
	a.must(t, "POST", "/api/admin/reset", nil, nil, 200)
	<-done
	a.must(t, "PUT", "/api/admin/faults", map[string]any{"seed": 1, "work_ms": 0}, nil, 200)
	a.must(t, "GET", "/api/audit", nil, nil, 200)
}

// ---------------------------------------------------------------------------
// The alert rules.

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func rules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	if err := yaml.Unmarshal([]byte(read(t, "deploy/prometheus/rules.yml")), &f); err != nil {
		t.Fatalf("rules.yml: %v", err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("rules.yml has no rules")
	}
	return out
}

var (
	metricRef  = regexp.MustCompile(`\b(flashsale_[a-z0-9_]+|up)\b`)
	selector   = regexp.MustCompile(`\b(flashsale_[a-z0-9_]+|up)\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	targetOnly = map[string]bool{"instance": true, "job": true} // added by Prometheus at scrape time
)

// checkExpr reports what in a PromQL expression does not match the scrape:
// unknown metrics, labels no such metric has, label values that cannot occur.
func checkExpr(expr string, s scrape, job string) []string {
	var problems []string
	labelsInExpr := map[string]bool{}
	for _, m := range metricRef.FindAllString(expr, -1) {
		if m == "up" {
			continue
		}
		labels, ok := s.samples[m]
		if !ok {
			problems = append(problems, fmt.Sprintf("metric %s is not exported", m))
			continue
		}
		for l := range labels {
			labelsInExpr[l] = true
		}
	}
	outcomes := []string{string(lock.Acquired), string(lock.Busy), string(lock.Unavailable), string(lock.Crashed)}
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		name := sel[1]
		for _, mt := range matcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := mt[1], mt[2], mt[3]
			if name == "up" {
				if label == "job" && value != job {
					problems = append(problems, fmt.Sprintf("up{job=%q}, but prometheus.yml scrapes the app as job %q", value, job))
				}
				continue
			}
			if !s.samples[name][label] && !targetOnly[label] {
				problems = append(problems, fmt.Sprintf("%s has no label %q (it has %v)", name, label, keys(s.samples[name])))
				continue
			}
			if op == "=~" || op == "!~" {
				continue
			}
			switch label {
			case "outcome":
				if !slices.Contains(outcomes, value) {
					problems = append(problems, fmt.Sprintf("%s{outcome=%q}: the outcomes are %v", name, value, outcomes))
				}
			case "variant":
				if !slices.Contains(lock.Names(), value) {
					problems = append(problems, fmt.Sprintf("%s{variant=%q}: no such variant", name, value))
				}
			case "route":
				if !s.values["route"][value] {
					problems = append(problems, fmt.Sprintf("%s{route=%q}: no such route template in the scrape", name, value))
				}
			case "code":
				if !regexp.MustCompile(`^[1-5][0-9][0-9]$`).MatchString(value) {
					problems = append(problems, fmt.Sprintf("%s{code=%q}: not a status code", name, value))
				}
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			l = strings.TrimSpace(l)
			if l == "" || targetOnly[l] || labelsInExpr[l] {
				continue
			}
			problems = append(problems, fmt.Sprintf("groups by %q, which no metric of the expression has", l))
		}
	}
	return problems
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6}\s+(.+)$`).FindAllStringSubmatch(md, -1) {
		out[githubAnchor(m[1])] = true
	}
	return out
}

func TestRulesAreWellFormed(t *testing.T) {
	ops := read(t, "docs/operations.md")
	heads := anchors(ops)
	seen := map[string]bool{}
	for _, r := range rules(t) {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, sev)
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("%s: no summary annotation", r.Alert)
		}
		want := "docs/operations.md#" + strings.ToLower(r.Alert)
		if r.Annotations["runbook"] != want {
			t.Errorf("%s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
		}
		if !heads[strings.ToLower(r.Alert)] {
			t.Errorf("%s: docs/operations.md has no heading %q to explain it", r.Alert, r.Alert)
		}
		if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
			t.Errorf("%s: unbalanced parentheses in %q", r.Alert, r.Expr)
		}
	}
	for _, want := range []string{"FlashsaleLockAcquireFailureRate", "FlashsaleSlowLockAcquire", "FlashsaleStaleFenceRejections", "FlashsaleAuditNotOK"} {
		if !seen[want] {
			t.Errorf("rules.yml has no alert %s", want)
		}
	}
	// Every alert heading of operations.md is a real alert.
	for _, m := range regexp.MustCompile(`(?m)^###\s+(Flashsale[A-Za-z]+)\s*$`).FindAllStringSubmatch(ops, -1) {
		if !seen[m[1]] {
			t.Errorf("docs/operations.md explains alert %s, which rules.yml does not define", m[1])
		}
	}
	// Prometheus's config loads the rules and scrapes the app replicas.
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "deploy/prometheus/prometheus.yml")), &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.RuleFiles, "rules.yml") {
		t.Errorf("prometheus.yml rule_files %v does not load rules.yml", cfg.RuleFiles)
	}
	svcs, _ := loadCompose(t, composeEnv)
	var targets []string
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	var want []string
	for _, a := range appServices(svcs) {
		want = append(want, a+":8080")
	}
	if !slices.Equal(targets, want) {
		t.Errorf("prometheus.yml scrapes %v, want the app replicas %v", targets, want)
	}
}

// promtool, when installed, checks the PromQL itself and runs the rules'
// unit tests (deploy/prometheus/rules_test.yml).
func TestPromtool(t *testing.T) {
	tool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus); the other tests check the rules' metric names")
	}
	dir := filepath.Join(root, "deploy/prometheus")
	for _, args := range [][]string{
		{"check", "rules", "rules.yml"},
		{"test", "rules", "rules_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(tool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The compose environment runs the real app; every metric and label the
// alert rules use is one it exports, and docs/operations.md lists exactly
// the metrics it exports, with their types and labels.
func TestComposeEnvironmentRunsTheApp(t *testing.T) {
	a := startApp(t, composeAppEnv(t, map[string]string{"FLASHSALE_WATCHDOG": "true"}))
	exerciseApp(t, a)
	s := scrapeMetrics(t, a)

	t.Run("rules use exported metrics", func(t *testing.T) {
		var cfg struct {
			ScrapeConfigs []struct {
				JobName string `yaml:"job_name"`
			} `yaml:"scrape_configs"`
		}
		_ = yaml.Unmarshal([]byte(read(t, "deploy/prometheus/prometheus.yml")), &cfg)
		job := ""
		if len(cfg.ScrapeConfigs) > 0 {
			job = cfg.ScrapeConfigs[0].JobName
		}
		for _, r := range rules(t) {
			for _, p := range checkExpr(r.Expr, s, job) {
				t.Errorf("%s: %s", r.Alert+r.Record, p)
			}
		}
	})

	t.Run("operations.md lists the exported metrics", func(t *testing.T) {
		ops := read(t, "docs/operations.md")
		exported := map[string]bool{}
		for name := range s.samples {
			if strings.HasPrefix(name, "flashsale_") {
				exported[s.family(name)] = true
			}
		}
		documented := map[string]bool{}
		row := regexp.MustCompile("(?m)^\\|\\s*`(flashsale_[a-z0-9_]+)`\\s*\\|\\s*([a-z]+)\\s*\\|([^|]*)\\|")
		for _, m := range row.FindAllStringSubmatch(ops, -1) {
			name, typ := m[1], m[2]
			documented[name] = true
			if !exported[name] {
				t.Errorf("operations.md lists %s, which the app does not export", name)
				continue
			}
			if s.families[name] != typ {
				t.Errorf("operations.md says %s is a %s; it is a %s", name, typ, s.families[name])
			}
			var labels []string
			for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[3], -1) {
				labels = append(labels, l[1])
			}
			sort.Strings(labels)
			if got := s.familyLabels(name); !slices.Equal(labels, got) {
				t.Errorf("operations.md gives %s the labels %v; it has %v", name, labels, got)
			}
		}
		for name := range exported {
			if !documented[name] {
				t.Errorf("the app exports %s, which the metrics table of operations.md does not list", name)
			}
		}
		for _, m := range regexp.MustCompile(`flashsale_[a-z0-9_]+`).FindAllString(ops, -1) {
			if !exported[s.family(m)] && !exported[m] {
				t.Errorf("operations.md mentions %s, which the app does not export", m)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// The load runner's entrypoint: relays on loopback, then the runner against
// the app through them.

func TestLoadtestEntrypoint(t *testing.T) {
	need(t, "socat", "relay loopback ports to the app containers in the loadtest image")
	if testing.Short() {
		t.Skip("starts the app and a load run")
	}
	bins := binaries(t)
	env := composeAppEnv(t, nil)
	a := startApp(t, env)
	addr := strings.TrimPrefix(a.base, "http://")
	nodes := regexp.MustCompile(`addrs=(\S+)`).FindStringSubmatch(a.stderr.String())

	out := t.TempDir()
	cmd := exec.Command("sh", filepath.Join(root, "deploy/loadtest/entrypoint.sh"),
		"-variants", "lua", "-scenarios", "clean", "-rate", "100", "-duration", "1s", "-out", out)
	cmd.Env = append(cleanEnv(),
		"PATH="+filepath.Dir(bins["loadtest"])+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FLASHSALE_ADMIN_TOKEN="+env["FLASHSALE_ADMIN_TOKEN"],
		"LOADTEST_APPS="+addr,
		"LOADTEST_LOCK_TTL="+env["FLASHSALE_LOCK_TTL"],
		"LOADTEST_APP_PORT_BASE="+fmt.Sprint(freePortBase(t, 1)),
	)
	if nodes != nil && !strings.Contains(a.stderr.String(), "in-process") {
		cmd.Env = append(cmd.Env, "LOADTEST_REDIS="+strings.ReplaceAll(nodes[1], ",", " "),
			"LOADTEST_REDIS_PORT_BASE="+fmt.Sprint(freePortBase(t, strings.Count(nodes[1], ",")+1)))
	}
	// Its own process group: the relays outlive the shell that exec'd the
	// runner, and are stopped with the group when the test ends. Output goes
	// to files, not pipes: the relays hold them open after the runner exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdoutF, err := os.Create(filepath.Join(out, "entrypoint.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdoutF.Close()
	stderrF, err := os.Create(filepath.Join(out, "entrypoint.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderrF.Close()
	cmd.Stdout, cmd.Stderr = stdoutF, stderrF
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGTERM) })
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	output := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, "entrypoint."+name))
		return string(b)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("entrypoint: %v\nstdout:\n%s\nstderr:\n%s", err, output("stdout"), output("stderr"))
		}
	case <-time.After(90 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waited
		t.Fatalf("the load run did not end within 90s\n%s", output("stderr"))
	}
	var rep struct {
		Notes []string `json:"notes"`
		Cells []struct {
			Variant, Scenario, Expected, Seen, Verdict string
		} `json:"cells"`
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 1 || rep.Cells[0].Verdict != "ok" || rep.Cells[0].Seen != "holds" {
		t.Errorf("lua × clean through the relays: %+v\n%s", rep.Cells, output("stdout"))
	}
	if relayedRedis := slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "LOADTEST_REDIS=") }); relayedRedis {
		for _, n := range rep.Notes {
			if strings.Contains(n, "no Redis URLs") {
				t.Errorf("the runner did not get the relayed Redis URLs: %q", n)
			}
		}
	}
	if !strings.Contains(output("stderr"), "via http://127.0.0.1:") {
		t.Errorf("the entrypoint did not say which relays it set up:\n%s", output("stderr"))
	}
}

// freePortBase finds base such that base+1 … base+n are free on loopback.
func freePortBase(t *testing.T, n int) int {
	t.Helper()
	// Below the kernel's ephemeral range (32768 and up), where outgoing
	// connections and their TIME_WAIT leftovers never sit.
	for try := 0; try < 200; try++ {
		base := 20000 + mrand.IntN(12000)
		ok := true
		for i := 1; i <= n && ok; i++ {
			if c, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i)); err != nil {
				ok = false
			} else {
				_ = c.Close()
			}
		}
		if ok && base+n < 65535 {
			return base
		}
	}
	t.Fatal("no run of free loopback ports")
	return 0
}

// ---------------------------------------------------------------------------
// Redis with an ACL user and TLS, as docs/operations.md sets it up.

// startRedis starts redis-server with args on a free port, by PID, and stops
// it the same way when the test ends.
func startRedis(t *testing.T, args ...string) {
	t.Helper()
	bin := need(t, "redis-server", "run Redis with the ACL and TLS of docs/operations.md")
	cmd := exec.Command(bin, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "Ready to accept connections") {
		select {
		case <-exited:
			t.Fatalf("redis-server %s exited:\n%s", strings.Join(args, " "), out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server not ready after 10s:\n%s", out.String())
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// testCA writes a CA and a server certificate for 127.0.0.1 into dir.
func testCA(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flashsale test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	return write("ca.crt", "CERTIFICATE", caDER), write("server.crt", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// The app works as the ACL user of deploy/redis/users.acl.example, over TLS
// (rediss://, the CA given by SSL_CERT_FILE), with deploy/redis/redis.conf's
// settings: every variant sells, the audit and a reset run, concurrent buyers
// wait, and Redis's ACL LOG shows no denial but the optional CONFIG calls.
func TestRedisACLAndTLS(t *testing.T) {
	dir := t.TempDir()
	pw := make([]byte, 12)
	_, _ = rand.Read(pw)
	password := hex.EncodeToString(pw)
	acl := strings.ReplaceAll(read(t, "deploy/redis/users.acl.example"), "CHANGE-ME", password)
	if acl == read(t, "deploy/redis/users.acl.example") {
		t.Fatal("users.acl.example has no CHANGE-ME password to replace")
	}
	acl += "user testadmin on >" + password + " ~* &* +@all\n" // to read the ACL LOG
	aclFile := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	// redis.conf's directives, minus the file paths this test provides.
	var args []string
	for _, line := range strings.Split(read(t, "deploy/redis/redis.conf"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w := shellWords(line)
		if w[0] == "aclfile" {
			continue
		}
		if len(w) == 1 {
			w = append(w, "")
		}
		args = append(args, "--"+w[0])
		args = append(args, w[1:]...)
	}
	ca, cert, key := testCA(t, dir)
	port := freePort(t)
	args = append(args, "--port", "0", "--tls-port", fmt.Sprint(port), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no", "--aclfile", aclFile, "--dir", dir)
	startRedis(t, args...)

	url := fmt.Sprintf("rediss://flashsale:%s@127.0.0.1:%d/0", password, port)
	a := startApp(t, composeAppEnv(t, map[string]string{"FLASHSALE_REDIS": url, "SSL_CERT_FILE": ca}))
	ps := products(t, a)
	for i, v := range lock.Names() {
		a.must(t, "POST", "/api/orders", map[string]any{"sku": ps[0].SKU, "qty": 1, "user": fmt.Sprintf("acl%d", i)},
			map[string]string{"X-Lock-Variant": v}, 201)
	}
	// Buyers of one SKU queue for its lock: waiters subscribe to its
	// keyspace channel.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			code, b, err := a.do(t, "POST", "/api/orders", map[string]any{"sku": ps[0].SKU, "qty": 1, "user": fmt.Sprintf("q%d", i)},
				map[string]string{"X-Lock-Variant": "redlock"})
			if err != nil || (code != 201 && code != 503) {
				t.Errorf("queued buyer %d: %d %v %s", i, code, err, b)
			}
		})
	}
	wg.Wait()
	a.must(t, "GET", "/api/audit", nil, nil, 200)
	a.must(t, "POST", "/api/admin/reset", nil, nil, 200)

	opt, err := redis.ParseURL(strings.Replace(url, "flashsale:", "testadmin:", 1))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pemCA, _ := os.ReadFile(ca)
	pool.AppendCertsFromPEM(pemCA)
	opt.TLSConfig.RootCAs = pool
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entries, err := rdb.ACLLog(ctx, 100).Result()
	if err != nil {
		t.Fatalf("ACL LOG: %v", err)
	}
	for _, e := range entries {
		// CONFIG is deliberately not granted: redis.conf turns keyspace
		// events on. CLIENT SETINFO (Redis ≥ 7.2) is optional to go-redis.
		if e.Username == "flashsale" && !slices.Contains([]string{"config|get", "config|set", "client|setinfo"}, e.Object) {
			t.Errorf("Redis refused the app: %s %q (%s)", e.Reason, e.Object, e.Context)
		}
	}
	if strings.Contains(a.stderr.String(), "NOPERM") {
		t.Errorf("the app logged a permission error:\n%s", a.stderr.String())
	}
}
