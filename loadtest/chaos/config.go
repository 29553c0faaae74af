package chaos

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"flashsale/curriculum"
	"flashsale/internal/cli"
	"flashsale/loadtest"
	"flashsale/loadtest/cluster"
)

// Config configures a chaos run: every selected variant sells side by
// side, each on SKUs and seats of its own, on three app instances and five
// Redis nodes, while a seeded nemesis breaks the world.
type Config struct {
	// Variants to run; nil means all.
	Variants []string
	// Faults are the nemesis's fault kinds; nil means FaultKinds.
	Faults []string
	// Duration is how long the clients work and the nemesis strikes.
	// Default 2m.
	Duration time.Duration
	// Seed fixes the nemesis's schedule and the traffic. Default 1.
	Seed uint64
	// Rate is each variant's purchases per second. Default 30.
	Rate int
	// MultiShare is the share of purchases for 2 or 3 units; the rest are
	// for one. The command's default is DefaultMultiShare.
	MultiShare float64
	// WorkMS is the business work inside every critical section: long
	// enough that the hot lock is always wanted, so a fault that frees it
	// early has a waiter to let in. Default 40.
	WorkMS int
	// LockTTL and LockWait are the instances' lease TTL and wait budget.
	// Defaults 500ms and 1s.
	LockTTL, LockWait time.Duration
	// Batch runs every variant with batching under one lease on (the
	// app's -batch).
	Batch bool
	// Taught runs every variant with the locks' speed layer off (the
	// app's -fast=false): waiters retry after a random delay, as the rung
	// files teach, instead of waiting in line for a hand-over.
	Taught bool
	// Unaware runs the instances with Redlock restart awareness off, to
	// show what it prevents: a node that lost its data votes at once.
	Unaware bool
	// Local is the environment; Instances and Nodes default to 3 and 5,
	// and AOF and History are always on.
	Local cluster.LocalConfig
	// OutDir receives chaos.json, chaos.html, the histories and the
	// environment. Required.
	OutDir string
	// Logger receives notes as the run goes. Default: discard.
	Logger *slog.Logger
}

// DefaultMultiShare is the command's share of purchases for 2 or 3 units.
const DefaultMultiShare = loadtest.DefaultMultiShare

func (c *Config) defaults() error {
	var err error
	if c.Variants, err = cli.Pick(strings.Join(c.Variants, ","), loadtest.Variants); err != nil {
		return fmt.Errorf("variants: %w", err)
	}
	if c.Faults, err = cli.Pick(strings.Join(c.Faults, ","), FaultKinds); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	if c.Duration <= 0 {
		c.Duration = 2 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.MultiShare < 0 || c.MultiShare > 1 {
		return fmt.Errorf("multi-share %v is not a share between 0 and 1", c.MultiShare)
	}
	if c.Rate <= 0 {
		c.Rate = 30
	}
	if c.WorkMS <= 0 {
		c.WorkMS = 40
	}
	if c.LockTTL <= 0 {
		c.LockTTL = 500 * time.Millisecond
	}
	if c.LockWait <= 0 {
		c.LockWait = time.Second
	}
	if c.OutDir == "" {
		return errors.New("a chaos run needs an output directory")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Local.Instances <= 0 {
		c.Local.Instances = 3
	}
	if c.Local.Nodes <= 0 {
		c.Local.Nodes = 5
	}
	if c.Local.Instances < 2 || c.Local.Nodes < 3 {
		return errors.New("a chaos run needs at least 2 app instances and 3 Redis nodes")
	}
	c.Local.AOF, c.Local.History = true, true
	if c.Unaware {
		unaware := c.Local.UnawareArgs
		if unaware == nil {
			unaware = cluster.DefaultUnawareArgs
		}
		c.Local.ExtraArgs = append(slices.Clone(c.Local.ExtraArgs), unaware...)
	}
	c.Local.LockTTL, c.Local.LockWait = c.LockTTL, c.LockWait
	c.Local.Dir = filepath.Join(c.OutDir, "env")
	if c.Local.Logger == nil {
		c.Local.Logger = c.Logger
	}
	return nil
}

// Expected is what a variant must do under the given fault kinds, as the
// curriculum declares it (curriculum.Lesson.Chaos): loadtest.Holds, or
// loadtest.Breaks with the kinds that can break it (none for a rung that
// concurrency alone breaks); loadtest.NoClaim for a rung that claims
// nothing here. unaware says the instances run without restart awareness.
func Expected(variant string, kinds []string, unaware bool) (loadtest.Outcome, []string) {
	r, ok := curriculum.Find(variant)
	if !ok || r.Chaos == nil {
		return loadtest.NoClaim, nil
	}
	if r.Chaos.Alone {
		return loadtest.Breaks, nil
	}
	breakers := r.Chaos.Breakers
	if unaware {
		breakers = append(slices.Clone(breakers), r.Chaos.Unaware...)
	}
	var by []string
	for _, k := range kinds {
		if slices.Contains(breakers, k) || slices.Contains(breakers, curriculum.AnyFault) {
			by = append(by, k)
		}
	}
	if len(by) == 0 {
		return loadtest.Holds, nil
	}
	return loadtest.Breaks, by
}
