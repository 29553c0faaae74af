// Package testsupport gives every test of the project the real parts it runs
// on, with one rule for each: redis-server nodes on free loopback ports, a
// SQLite file in a temporary directory, a fresh PostgreSQL schema, the
// project's binaries built once per test binary, and the storefront started
// as a process. In CI (see CI) a missing part fails the test; elsewhere the
// test is skipped, so a green CI run never hides an untested part.
//
// It imports no package of the app except internal/localredis, so the tests
// of any package, lock included, can use it without an import cycle.
package testsupport

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/randhex"
)

// CI reports whether the tests run in CI, where a missing part fails the
// test instead of skipping it: CI is set to a true value (true, 1, …), as
// .ci/run and the common CI services set it.
func CI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Long skips a test under go test -short: one that runs for seconds (a
// sale under load, the storefront built and started, a browser, a
// failover). The fast run keeps, in every package, tests that use the same
// real parts in less time; CI runs them all.
func Long(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("left out of go test -short: " + what)
	}
}

// Missing fails the test in CI and skips it elsewhere, saying what is missing.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if CI() {
		tb.Fatalf("CI: "+format+" (.ci/run installs what the tests need)", args...)
	}
	tb.Skipf(format, args...)
}

// Need returns the path of tool, or marks the test as Missing it. why says
// what the test needs it for.
func Need(tb testing.TB, tool, why string) string {
	tb.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		Missing(tb, "%s is not installed (needed to %s)", tool, why)
	}
	return p
}

// Logger is a logger for tests: quiet unless FLASHSALE_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("FLASHSALE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// quietRedis drops go-redis's own log lines (a stopped node makes every
// client and subscription print a dial error several times a second).
type quietRedis struct{}

// Printf drops the line.
func (quietRedis) Printf(context.Context, string, ...any) {}

// Main runs a test binary: it silences go-redis's process-wide logger before
// any client exists (unless FLASHSALE_TEST_LOG is set), runs the tests and
// removes the binaries Binary built. It returns m.Run's exit code; call it
// from TestMain as os.Exit(testsupport.Main(m)).
func Main(m *testing.M) int {
	if os.Getenv("FLASHSALE_TEST_LOG") == "" {
		redis.SetLogger(quietRedis{})
	}
	code := m.Run()
	removeBuilds()
	return code
}

// Namespace is a lock namespace unique to one test, so tests sharing nodes
// never see each other's keys.
func Namespace() string {
	return fmt.Sprintf("fs%s:", randhex.String(4))
}

// FreePort is a loopback port that was free a moment ago. Another process
// could take it before the caller binds it; on loopback that race is rare.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeAddr is FreePort as host:port.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
}

// TestLog is a logger that writes the records at level and above to tb's
// log, so they show with the test that made them.
func TestLog(tb testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: level}))
}

// tbWriter sends each write to tb's log, one call per record.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
