package sweep

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"flashsale/internal/randhex"
	"flashsale/loadtest/cluster"
)

// The store's own ceiling.
//
// Every lock rung ends its sale in the same transaction: the new stock and
// the order, together. However fast the lock hands the key on, no variant
// sells faster than the store commits that transaction, so the scale run
// measures it first, with nothing else running: the inventory package's
// store benchmark, which calls the sale's own write with no lock and no
// read before it, one writer per product at a time (at most 16). Its writes/s is the plots'
// limit line.

// Ceiling is the store's own write rate: the sale's transaction alone, on
// Database, spread over SKUs products.
type Ceiling struct {
	Database string  `json:"database"`
	SKUs     int     `json:"skus"`
	Writes   float64 `json:"writes_per_second"`
}

// CeilingCommand is the benchmark MeasureCeiling runs, as it can be run by
// hand from the module root.
const CeilingCommand = "go test ./inventory -run '^$' -bench '^BenchmarkStoreCeiling$' -benchtime 2s"

// benchLine reads one result line of the store benchmark.
var benchLine = regexp.MustCompile(`^BenchmarkStoreCeiling/(sqlite|postgres)/skus=(\d+)(?:-\d+)?\s.*\s([\d.]+) writes/s`)

// MeasureCeiling runs the store benchmark in the flashsale module at
// moduleDir ("" finds it from the working directory) for every SKU count
// of skus, on SQLite and, when postgres is a URL, on PostgreSQL there.
func MeasureCeiling(ctx context.Context, moduleDir, postgres string, skus []int) ([]Ceiling, error) {
	if moduleDir == "" {
		var err error
		if moduleDir, err = cluster.FindModule("."); err != nil {
			return nil, err
		}
	}
	dbs := "sqlite"
	if postgres != "" {
		dbs = "(sqlite|postgres)"
	}
	var counts []string
	for _, n := range skus {
		counts = append(counts, strconv.Itoa(n))
	}
	pattern := fmt.Sprintf("^BenchmarkStoreCeiling$/^%s$/^skus=(%s)$", dbs, strings.Join(counts, "|"))
	cmd := exec.CommandContext(ctx, "go", "test", "./inventory", "-run", "^$", "-bench", pattern, "-benchtime", "2s", "-count", "1")
	cmd.Dir = moduleDir
	cmd.Env = os.Environ()
	if postgres != "" {
		cmd.Env = append(cmd.Env, "FLASHSALE_TEST_POSTGRES="+postgres)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", CeilingCommand, err, out.String())
	}
	return parseCeiling(out.String()), nil
}

// parseCeiling reads the store benchmark's output.
func parseCeiling(out string) []Ceiling {
	var cs []Ceiling
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])           // digits by the pattern
		w, _ := strconv.ParseFloat(m[3], 64) // digits by the pattern
		db := "SQLite"
		if m[1] == "postgres" {
			db = "PostgreSQL"
		}
		cs = append(cs, Ceiling{Database: db, SKUs: n, Writes: w})
	}
	return cs
}

// ownSchema makes a schema of the run's own on the PostgreSQL server at
// base and returns a URL whose search_path is it, and the func that drops
// it; "" makes nothing.
func ownSchema(ctx context.Context, base string) (string, func() error, error) {
	if base == "" {
		return "", func() error { return nil }, nil
	}
	admin, err := gorm.Open(postgres.Open(base), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	sqlDB, err := admin.DB()
	if err != nil {
		return "", nil, err
	}
	schema := "fs_scale_" + randhex.String(6)
	if err := admin.WithContext(ctx).Exec("CREATE SCHEMA " + schema).Error; err != nil {
		sqlDB.Close()
		return "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop := func() error {
		defer sqlDB.Close()
		return admin.Exec("DROP SCHEMA " + schema + " CASCADE").Error
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, errors.Join(err, drop())
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// describeMachine names this machine as the plots' captions do: cores, CPU
// model, OS.
func describeMachine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d cores, %s, %s/%s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}
