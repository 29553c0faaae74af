package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Root is the module root, found from the test's working directory (a
// package directory inside the module).
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// Read is the text of the file at rel, relative to the module root.
func Read(tb testing.TB, rel string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Root(tb), rel))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// CleanEnv is the test's environment without anything that would change
// what the app or the load runner sees: every FLASHSALE_* variable, and each
// of drop (a name, or a prefix when it ends in "_").
func CleanEnv(drop ...string) []string {
	drop = append(drop, "FLASHSALE_")
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(drop, func(d string) bool {
			return k == d || (strings.HasSuffix(d, "_") && strings.HasPrefix(k, d))
		}) {
			out = append(out, kv)
		}
	}
	return out
}

// builds are the binaries built by this test binary, one per package.
var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// Binary builds the main package pkg ("." for the storefront,
// "./loadtest/cmd/loadtest" for the load runner) once per test binary and
// returns its path. Main removes it when the tests end.
func Binary(tb testing.TB, pkg string) string {
	tb.Helper()
	root := Root(tb)
	builds.mu.Lock()
	if builds.bins == nil {
		builds.bins = map[string]*build{}
	}
	b := builds.bins[pkg]
	if b == nil {
		b = &build{}
		builds.bins[pkg] = b
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "flashsale-test-bin-")
		if err != nil {
			builds.mu.Unlock()
			tb.Fatal(err)
		}
		builds.dir = dir
	}
	dir := builds.dir
	builds.mu.Unlock()
	b.once.Do(func() {
		name := filepath.Base(filepath.Join(root, pkg))
		if pkg == "." {
			name = "flashsale"
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir, cmd.Env = root, CleanEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// removeBuilds removes what Binary built.
func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
}

// Help is what the binary at bin says to -h, in CleanEnv(drop...) (so the
// defaults it shows are its own).
func Help(tb testing.TB, bin string, drop ...string) string {
	tb.Helper()
	cmd := exec.Command(bin, "-h")
	cmd.Env = CleanEnv(drop...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("%s -h: %v\n%s", bin, err, out)
	}
	return string(out)
}
