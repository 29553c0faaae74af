package testsupport

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"flashsale/internal/randhex"
)

// SQLite is the path of a fresh SQLite file in the test's temporary directory.
func SQLite(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), "flashsale.db")
}

// PostgresBase is the server the PostgreSQL tests use: database test on
// 127.0.0.1:5432 with trust auth, or FLASHSALE_TEST_POSTGRES.
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
		Missing(tb, "PostgreSQL not reachable at %s: %v", base, err)
		return ""
	}
	sqlDB, _ := admin.DB()
	schema := "fs_test_" + randhex.String(6)
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
