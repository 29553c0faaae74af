// Package testenv gives the storefront's tests the real parts they run on:
// redis-server nodes on loopback ports, a SQLite file in a temporary
// directory and, where one is reachable, a fresh PostgreSQL schema. In CI
// (CI=true) a missing redis-server or PostgreSQL fails the test instead of
// skipping it, so a green CI run never hides an untested part.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"flashsale/internal/localredis"
	"flashsale/internal/redistest"
)

// CI reports whether the tests run in CI, where missing parts fail.
func CI() bool { return os.Getenv("CI") == "true" }

// missing fails in CI and skips elsewhere.
func missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if CI() {
		tb.Fatalf("CI=true: "+format, args...)
	}
	tb.Skipf(format, args...)
}

// Logger is a logger for tests: quiet unless FLASHSALE_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("FLASHSALE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Redis starts n real redis-server nodes, stopped when the test ends.
func Redis(tb testing.TB, n int) *localredis.Cluster {
	tb.Helper()
	if !localredis.Available() {
		missing(tb, "redis-server is not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := localredis.Start(ctx, n, localredis.Options{Logger: Logger()})
	if err != nil {
		tb.Fatalf("start %d redis nodes: %v", n, err)
	}
	if err := c.Aged(ctx, redistest.Age); err != nil {
		tb.Fatalf("new redis nodes: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("stop redis nodes: %v", err)
		}
	})
	return c
}

// Options are go-redis options for every node of c, first node first.
func Options(tb testing.TB, c *localredis.Cluster) []*redis.Options {
	tb.Helper()
	var out []*redis.Options
	for _, u := range c.URLs() {
		o, err := redis.ParseURL(u)
		if err != nil {
			tb.Fatalf("parse %s: %v", u, err)
		}
		out = append(out, o)
	}
	return out
}

// SQLite is the path of a fresh SQLite file in the test's temporary directory.
func SQLite(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), "flashsale.db")
}

// PostgresBase is the server the PostgreSQL tests use; FLASHSALE_TEST_POSTGRES
// overrides it.
func PostgresBase() string {
	if u := os.Getenv("FLASHSALE_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&connect_timeout=3"
}

// Postgres creates a schema of its own for the test and returns a DSN whose
// search_path points at it; the schema is dropped when the test ends.
func Postgres(tb testing.TB) string {
	tb.Helper()
	base := PostgresBase()
	admin, err := gorm.Open(postgres.Open(base), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		missing(tb, "PostgreSQL not reachable at %s: %v", base, err)
		return ""
	}
	sqlDB, _ := admin.DB()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "fs_test_" + hex.EncodeToString(b[:])
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		sqlDB.Close()
		tb.Fatalf("create schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		defer sqlDB.Close()
		if err := admin.Exec("DROP SCHEMA " + schema + " CASCADE").Error; err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("parse %s: %v", base, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Database is one kind of database the suite runs against.
type Database struct {
	Name string
	DSN  func(testing.TB) string
}

// Databases are SQLite and PostgreSQL, for tests that run on both.
func Databases() []Database {
	return []Database{{Name: "sqlite", DSN: SQLite}, {Name: "postgres", DSN: Postgres}}
}

// Namespace is a lock namespace unique to one test, so tests sharing nodes
// never see each other's keys.
func Namespace() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("fs%s:", hex.EncodeToString(b[:]))
}

// quietRedis drops go-redis's own log lines (a stopped node makes every
// client and subscription print a dial error several times a second).
type quietRedis struct{}

// Printf drops the line.
func (quietRedis) Printf(context.Context, string, ...any) {}

// Main runs a test binary: it silences go-redis's process-wide logger before
// any client exists (unless FLASHSALE_TEST_LOG is set) and returns m.Run's
// exit code. Call it from TestMain.
func Main(m *testing.M) int {
	if os.Getenv("FLASHSALE_TEST_LOG") == "" {
		redis.SetLogger(quietRedis{})
	}
	return m.Run()
}
