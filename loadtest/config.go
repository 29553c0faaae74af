package loadtest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"flashsale/internal/cli"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
)

// Config configures a run of the matrix. The zero value of every field
// means its default.
type Config struct {
	// Variants and Scenarios select the matrix's rows and columns; nil
	// means all of them.
	Variants  []string
	Scenarios []string
	// Cells, when set, runs only these cells, each "variant/scenario"
	// (e.g. "redlock/node-down"), within the selected rows and columns.
	Cells []string

	// JudgeAs, when set, judges every cell against this variant's expected
	// outcomes instead of its own: the cells of a rung being written
	// (lock/ladder/attendee.go) against the row it should reach.
	JudgeAs string

	// Rate is the requests per second of every attack. Default 300.
	Rate int
	// Duration is how long every attack lasts. Default 4s.
	Duration time.Duration
	// MaxRequests caps the requests of one attack. Default Rate × Duration.
	MaxRequests uint64
	// MaxWorkers caps vegeta's workers, hence the requests in flight.
	// Default 128.
	MaxWorkers uint64
	// Seed fixes the traffic and the faults; every variant of a scenario
	// gets the same ones. Default 1.
	Seed uint64

	// Catalogue is what every cell's sale starts with. Default
	// CellCatalogue().
	Catalogue *storefront.Catalogue
	// Mix is the shape of the traffic; its SKUs default to the catalogue's
	// (the first product hot, the others bulk). Default DefaultMix().
	Mix *traffic.Mix

	// LockTTL is the instances' lease TTL: it sizes the pause faults and the
	// node recipes. Default 500ms for the instances the runner starts; with
	// Targets, the TTL they say in GET /api, and a different one given
	// refuses the run.
	LockTTL time.Duration
	// LockWait is how long the instances wait for a busy lock. With
	// Targets, the wait they say, and a different one given refuses the
	// run; otherwise Local.LockWait.
	LockWait time.Duration
	// Watchdog turns the lease watchdog on in every cell, not only in the
	// columns that ask for it; the cells are judged as ExpectedWatchdog says.
	// Off, every cell runs with the watchdog its column asks for (off but
	// in long-work-watchdog), whatever the instances were started with.
	Watchdog bool
	// Taught runs every cell with the locks' speed layer off (-fast=false):
	// exactly the taught code, a waiter retrying after a random delay and
	// every release the rung's own. The expected outcomes are the same.
	Taught bool
	// Batch runs every cell with batching under one lease on (the app's
	// -batch, switched with the fault plan); the cells are judged as
	// ExpectedBatched says. Off, batching is switched off in every cell.
	Batch bool

	// Targets are running instances to attack instead of starting a local
	// environment. They must share one database and one set of Redis
	// nodes. Node scenarios are skipped against them.
	Targets []string
	// AdminToken is the Targets' admin token.
	AdminToken string
	// RedisURLs are the Targets' Redis nodes, for the runner's own scan for
	// stuck locks; without them only the audit's figure is used.
	RedisURLs []string
	// LockPattern matches lock keys in Redis. Default DefaultLockPattern.
	LockPattern string

	// Local configures the environment started when Targets is empty.
	Local cluster.LocalConfig
	// Env, when set (and Targets empty), is an environment already started
	// by cluster.StartLocal to run the cells in instead of starting one; Run leaves
	// it running. A caller running cells one Run at a time (each with its
	// own rate and duration) pays for the environment once.
	Env *cluster.Local

	// WarmUp is how long the unrecorded warm-up attack before the first
	// cell lasts. Default 1s; negative for none (one cell run by hand, say).
	WarmUp time.Duration

	// CheckTimeout bounds porcupine's check of one cell's history; a check
	// that runs out is "unknown", never a pass. Default
	// DefaultCheckTimeout.
	CheckTimeout time.Duration
	// OutDir receives vegeta's binary results per cell; "" writes none.
	OutDir string
	// Progress receives a progress bar per cell; nil shows none.
	Progress io.Writer
	// Logger receives notes as the run goes. Default: discard.
	Logger *slog.Logger
}

// CellCatalogue is the sale every cell starts with, made for measuring
// rather than for shoppers (the storefront's own default sale is
// inventory.DefaultCatalogue): one scarce hot SKU (it sells out, so
// overselling shows), four bulk SKUs that never sell out in a run (they
// carry the throughput) and a small seat map that seat grabs fight over.
func CellCatalogue() storefront.Catalogue {
	c := storefront.Catalogue{Seats: 20, Products: []storefront.Product{{SKU: "hot", Name: "Hot drop", PriceCents: 4999, Stock: 40}}}
	for i := 1; i <= 4; i++ {
		c.Products = append(c.Products, storefront.Product{SKU: fmt.Sprintf("bulk-%d", i), Name: fmt.Sprintf("Bulk item %d", i), PriceCents: 999, Stock: 100_000})
	}
	return c
}

// DefaultMix sends 20% of requests to seats, and of the purchases half to
// the hot SKU; 5% of all requests resend an earlier one, and a tenth of
// the orders are for 2 or 3 units.
func DefaultMix() traffic.Mix {
	return traffic.Mix{SeatShare: 0.2, HotShare: 0.5, DuplicateShare: 0.05, MultiShare: DefaultMultiShare}
}

// DefaultMultiShare is the share of orders for 2 or 3 units: a shop sells
// several at once, and an order of unknown outcome must then take all of
// its units or none.
const DefaultMultiShare = 0.1

func (c *Config) defaults() error {
	var err error
	if c.Variants, err = cli.Pick(strings.Join(c.Variants, ","), Variants); err != nil {
		return fmt.Errorf("variants: %w", err)
	}
	if c.Scenarios, err = cli.Pick(strings.Join(c.Scenarios, ","), ScenarioNames()); err != nil {
		return fmt.Errorf("scenarios: %w", err)
	}
	for i, cell := range c.Cells {
		v, sc, ok := strings.Cut(cell, "/")
		if !ok || !slices.Contains(Variants, v) || !slices.Contains(ScenarioNames(), sc) {
			return fmt.Errorf("cell %q: want variant/scenario, e.g. redlock/node-down", cell)
		}
		if _, ok := Expected(v, sc); !ok {
			return fmt.Errorf("cell %q is not in the matrix", cell)
		}
		if c.Watchdog {
			c.Cells[i] = v + "/" + WatchdogTwin(sc)
		}
	}
	if c.Watchdog {
		var twins []string
		for _, sc := range c.Scenarios {
			if t := WatchdogTwin(sc); !slices.Contains(twins, t) {
				twins = append(twins, t)
			}
		}
		c.Scenarios = twins
	}
	if c.JudgeAs != "" && !slices.Contains(Variants, c.JudgeAs) {
		return fmt.Errorf("judge as %q: not a variant (known: %s)", c.JudgeAs, strings.Join(Variants, ", "))
	}
	if c.Rate == 0 {
		c.Rate = 300
	}
	if c.Duration == 0 {
		c.Duration = 4 * time.Second
	}
	if c.Rate < 0 || c.Duration < 0 {
		return errors.New("rate and duration must be positive")
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = uint64(float64(c.Rate) * c.Duration.Seconds())
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = 128
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	if c.WarmUp == 0 {
		c.WarmUp = time.Second
	}
	if c.Catalogue == nil {
		cat := CellCatalogue()
		c.Catalogue = &cat
	}
	if c.Mix == nil {
		m := DefaultMix()
		c.Mix = &m
	}
	if c.Mix.HotSKU == "" && len(c.Mix.BulkSKUs) == 0 {
		for i, p := range c.Catalogue.Products {
			if i == 0 {
				c.Mix.HotSKU = p.SKU
			} else {
				c.Mix.BulkSKUs = append(c.Mix.BulkSKUs, p.SKU)
			}
		}
	}
	if c.Catalogue.Seats == 0 {
		c.Mix.SeatShare = 0
	}
	if c.LockTTL == 0 && len(c.Targets) == 0 {
		c.LockTTL = 500 * time.Millisecond
	}
	if c.LockWait == 0 && len(c.Targets) == 0 {
		c.LockWait = c.Local.LockWait
	}
	if c.Local.LockTTL == 0 {
		c.Local.LockTTL = c.LockTTL
	}
	if c.LockPattern == "" {
		c.LockPattern = cluster.DefaultLockPattern
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Local.Logger == nil {
		c.Local.Logger = c.Logger
	}
	for _, t := range c.Targets {
		if err := storefront.Loopback(t); err != nil {
			return err
		}
	}
	if len(c.Targets) > 0 && c.AdminToken == "" {
		return errors.New("attacking running instances needs their admin token")
	}
	return nil
}
