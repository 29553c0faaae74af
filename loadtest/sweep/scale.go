package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"flashsale/curriculum"
	"flashsale/internal/cli"
	"flashsale/internal/machine"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// How it scales.
//
// The sweep above asks how fast one hot SKU sells at rising rates. A team
// sizing a flash sale asks how the sales and the tail grow as the work
// does: more hot SKUs, more app instances, more Redis nodes, and where the
// store's own write rate stops them all. The scale run answers that at one
// offered rate, past what one hot key sells, one axis at a time around a
// base (3 instances, 5 nodes, 1 hot SKU): every hot-SKU count on every
// database, then every instance count and every node count on the first
// database (the nodes only for the variants that vote on them). Each
// point is a sweep step on a fresh sale, so its .bin, its cores and its
// audit are the sweep's own.

// ScaleVariants are the scale run's default variants: none is the ceiling
// of everything but the lock, lua one node's lock, redlock and
// redlock+fence the quorum's.
var ScaleVariants = []string{ladder.None, lock.Lua, lock.Redlock, lock.RedlockFence}

// ScaleConfig configures Scale. The zero value of every field means its
// default.
type ScaleConfig struct {
	// Variants are the lock variants measured. Default ScaleVariants.
	Variants []string
	// SKUs, Instances and Nodes are the axes: how many SKUs the orders
	// spread over evenly (default 1, 10, 100, 1000), app instances
	// (default 1, 2, 3, 6: separate processes) and Redis nodes (default
	// 3, 5, 7).
	SKUs, Instances, Nodes []int
	// Batch lists the -batch settings every point runs with. Default off
	// and on.
	Batch []bool
	// Postgres is the URL of a PostgreSQL server (database and user; the
	// run makes a schema of its own there and drops it at the end); ""
	// measures SQLite alone.
	Postgres string
	// Rate is the offered rate of every point, requests per second.
	// Default 400: past what one hot key sells unbatched, within what a
	// shared 2-core machine answers (at 1200 every variant ran out of cores).
	Rate int
	// Duration is how long each point is offered. Default 3s.
	Duration time.Duration
	// WorkMS is the business work inside every critical section. Default
	// 1; negative for none.
	WorkMS int
	// Local is the template of every environment started: its Instances,
	// Nodes and DB are the run's own. Dir "" is a temporary directory.
	Local cluster.LocalConfig
	// Ceiling measures the store's own write rate by database and SKU
	// count; nil runs the store benchmark (MeasureCeiling).
	Ceiling func(ctx context.Context, postgres string) ([]Ceiling, error)
	// OutDir receives vegeta's results of every point under
	// results/sweep/, named after the point; "" writes none.
	OutDir string
	// Progress receives a progress bar per point; nil shows none.
	Progress io.Writer
	// Logger receives notes as the run goes. Default: discard.
	Logger *slog.Logger
}

// The base every axis varies around.
const (
	baseInstances = 3
	baseNodes     = 5
	baseSKUs      = 1
)

func (c *ScaleConfig) defaults() error {
	var err error
	if len(c.Variants) == 0 {
		c.Variants = slices.Clone(ScaleVariants)
	}
	if c.Variants, err = cli.Pick(strings.Join(c.Variants, ","), curriculum.Names()); err != nil {
		return fmt.Errorf("variants: %w", err)
	}
	def := func(v *[]int, d ...int) error {
		if len(*v) == 0 {
			*v = d
		}
		for _, n := range *v {
			if n <= 0 {
				return fmt.Errorf("axis values must be positive, got %d", n)
			}
		}
		return nil
	}
	if err := errors.Join(def(&c.SKUs, 1, 10, 100, 1000), def(&c.Instances, 1, 2, 3, 6), def(&c.Nodes, 3, 5, 7)); err != nil {
		return err
	}
	if len(c.Batch) == 0 {
		c.Batch = []bool{false, true}
	}
	if c.Rate == 0 {
		c.Rate = 400
	}
	if c.Rate < 0 {
		return errors.New("rate must be positive")
	}
	if c.Duration == 0 {
		c.Duration = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Ceiling == nil {
		c.Ceiling = func(ctx context.Context, pg string) ([]Ceiling, error) {
			return MeasureCeiling(ctx, c.Local.ModuleDir, pg, c.SKUs)
		}
	}
	return nil
}

// Point is one measured point of the scale run: a variant, with or
// without batching, on one database, at one value of each axis.
type Point struct {
	// Axis is the axis the point belongs to: "skus", "instances" or
	// "nodes"; the base point belongs to all three, and is stored once,
	// under "skus".
	Axis      string `json:"axis"`
	Database  string `json:"database"`
	SKUs      int    `json:"skus"`
	Instances int    `json:"instances"`
	Nodes     int    `json:"redis_nodes"`
	Variant   string `json:"variant"`
	Batch     bool   `json:"batch"`
	Step      Step   `json:"step"`
}

// ScaleReport is a whole scale run.
type ScaleReport struct {
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Command  string        `json:"command,omitempty"`
	Machine  string        `json:"machine"`
	Rate     int           `json:"rate"`
	Duration time.Duration `json:"duration_ns"`
	WorkMS   int           `json:"work_ms"`
	LockTTL  time.Duration `json:"lock_ttl_ns"`
	LockWait time.Duration `json:"lock_wait_ns"`
	Variants []string      `json:"variants"`
	SKUs     []int         `json:"skus"`
	// Instances and Nodes are the axes' values; Databases the databases
	// in the order measured.
	Instances  []int     `json:"instances"`
	Nodes      []int     `json:"redis_nodes"`
	Batch      []bool    `json:"batch"`
	Databases  []string  `json:"databases"`
	Ceilings   []Ceiling `json:"store_ceilings"`
	LoadBefore string    `json:"load_average_before"`
	LoadAfter  string    `json:"load_average_after"`
	Points     []Point   `json:"points"`
	// Errors are the environments that could not start, and why.
	Errors []string `json:"errors,omitempty"`
}

// env is one environment of the run: its instances and nodes on one
// database, and the points measured on it.
type env struct {
	db                string
	instances, nodes  int
	axis              string
	skus              []int
	variants          []string
	databaseName, tag string
}

// plan is every environment of the run, in order.
func (c *ScaleConfig) plan(pg string) []env {
	dbs := []env{{databaseName: "SQLite", tag: "sqlite"}}
	if pg != "" {
		dbs = append(dbs, env{db: pg, databaseName: "PostgreSQL", tag: "pg"})
	}
	var out []env
	for _, d := range dbs {
		d.instances, d.nodes, d.axis, d.skus, d.variants = baseInstances, baseNodes, "skus", c.SKUs, c.Variants
		out = append(out, d)
	}
	first := dbs[0]
	for _, n := range c.Instances {
		if n != baseInstances {
			e := first
			e.instances, e.nodes, e.axis, e.skus, e.variants = n, baseNodes, "instances", []int{baseSKUs}, c.Variants
			out = append(out, e)
		}
	}
	voting := quorumOnly(c.Variants)
	for _, n := range c.Nodes {
		if n != baseNodes && len(voting) > 0 {
			e := first
			e.instances, e.nodes, e.axis, e.skus, e.variants = baseInstances, n, "nodes", []int{baseSKUs}, voting
			out = append(out, e)
		}
	}
	return out
}

// Scale runs the scale run: the store's ceiling first, with nothing else
// running, then every environment of the plan in turn, each started, its
// points measured and stopped. An environment that cannot start is in the
// report's Errors; a point that fails is in the report with its error.
func Scale(ctx context.Context, cfg ScaleConfig) (*ScaleReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rep := &ScaleReport{
		Started: time.Now(), Machine: describeMachine(), Rate: cfg.Rate, Duration: cfg.Duration,
		Variants: cfg.Variants, SKUs: cfg.SKUs, Instances: cfg.Instances, Nodes: cfg.Nodes, Batch: cfg.Batch,
		LoadBefore: machine.LoadAverage(),
	}
	pg, dropSchema, err := ownSchema(ctx, cfg.Postgres)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := dropSchema(); err != nil {
			cfg.Logger.Warn("dropping the run's schema", "err", err)
		}
	}()
	if rep.Ceilings, err = cfg.Ceiling(ctx, pg); err != nil {
		return nil, fmt.Errorf("the store's ceiling: %w", err)
	}
	root := cfg.Local.Dir
	if root == "" {
		if root, err = os.MkdirTemp("", "flashsale-scale-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(root)
	}
	plan := cfg.plan(pg)
	total := 0
	for _, e := range plan {
		total += len(e.skus) * len(e.variants) * len(cfg.Batch)
		if !slices.Contains(rep.Databases, e.databaseName) {
			rep.Databases = append(rep.Databases, e.databaseName)
		}
	}
	for _, e := range plan {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pts, sc, err := cfg.runEnv(ctx, e, filepath.Join(root, fmt.Sprintf("%s-%d-apps-%d-nodes", e.tag, e.instances, e.nodes)), len(rep.Points), total)
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s, %d instances, %d nodes: %v", e.databaseName, e.instances, e.nodes, err))
			cfg.Logger.Warn("scale environment", "db", e.databaseName, "instances", e.instances, "nodes", e.nodes, "err", err)
			continue
		}
		if cfg.Local.AppBin == "" {
			cfg.Local.AppBin = sc.Local.AppBin // built once, run by every environment after the first
		}
		rep.WorkMS, rep.LockTTL, rep.LockWait = sc.WorkMS, sc.Local.LockTTL, sc.Local.LockWait
		rep.Points = append(rep.Points, pts...)
	}
	rep.Finished, rep.LoadAfter = time.Now(), machine.LoadAverage()
	return rep, nil
}

// runEnv starts e in dir, measures its points, and stops it. n points ran
// before it, of total.
func (c *ScaleConfig) runEnv(ctx context.Context, e env, dir string, n, total int) ([]Point, Config, error) {
	sc := Config{Variants: e.variants, Rates: []int{c.Rate}, Duration: c.Duration, WorkMS: c.WorkMS, Local: c.Local,
		OutDir: c.OutDir, Progress: c.Progress, Logger: c.Logger}
	sc.Local.Instances, sc.Local.Nodes, sc.Local.DB, sc.Local.Dir = e.instances, e.nodes, e.db, dir
	if err := sc.defaults(); err != nil {
		return nil, sc, err
	}
	local, err := cluster.StartLocal(ctx, sc.Local)
	if err != nil {
		return nil, sc, err
	}
	defer func() {
		if err := local.Close(); err != nil {
			c.Logger.Warn("stopping a scale environment", "err", err)
		}
	}()
	if sc.Local.AppBin == "" {
		sc.Local.AppBin = filepath.Join(dir, "flashsale")
	}
	fleet := storefront.NewFleet(local.Bases(), local.Token())
	sc.nodeURLs = local.RedisURLs()
	var pts []Point
	for _, skus := range e.skus {
		cat, mix := spread(skus, sc.Stock)
		warm := traffic.WarmUp{Variants: e.variants, Rate: c.Rate, Duration: time.Second, MaxWorkers: sc.workers(c.Rate), Seed: sc.Seed, Catalogue: cat, Mix: mix}
		if err := warm.Run(ctx, fleet); err != nil {
			return pts, sc, err
		}
		for _, v := range e.variants {
			for _, batch := range c.Batch {
				if err := ctx.Err(); err != nil {
					return pts, sc, err
				}
				sc.Batch = batch
				name := pointName(e.tag, e.instances, e.nodes, skus, v, batch)
				st := runStep(ctx, sc, fleet, cat, mix, v, name, c.Rate, n+len(pts)+1, total)
				c.Logger.Info("scale point", "point", name, "sales_per_second", st.Sales, "p99", st.Summary.P99, "err", st.Err)
				pts = append(pts, Point{Axis: e.axis, Database: e.databaseName, SKUs: skus, Instances: e.instances, Nodes: e.nodes,
					Variant: v, Batch: batch, Step: st})
			}
		}
	}
	return pts, sc, nil
}

// pointName names a point in progress bars and result files.
func pointName(tag string, instances, nodes, skus int, variant string, batch bool) string {
	name := fmt.Sprintf("%s.%da.%dn.%ds.%s", tag, instances, nodes, skus, variant)
	if batch {
		name += "+batch"
	}
	return name
}

// spread is a sale of skus products, each with stock that never runs out,
// and the traffic that buys them evenly: one hot SKU when skus is 1.
func spread(skus int, stock int64) (storefront.Catalogue, traffic.Mix) {
	if skus == 1 {
		return storefront.Catalogue{Products: []storefront.Product{{SKU: hotSKU, Name: "Hot drop", PriceCents: 4999, Stock: stock}}},
			traffic.Mix{HotSKU: hotSKU, HotShare: 1}
	}
	var cat storefront.Catalogue
	var mix traffic.Mix
	each := max(stock/int64(skus), 100_000)
	for i := range skus {
		sku := fmt.Sprintf("hot-%d", i)
		cat.Products = append(cat.Products, storefront.Product{SKU: sku, Name: "Hot drop " + sku, PriceCents: 4999, Stock: each})
		mix.BulkSKUs = append(mix.BulkSKUs, sku)
	}
	return cat, mix
}

// quorumOnly are the variants among vs that ask a quorum of the nodes
// (Redlock's): the only ones whose cost the node count moves.
func quorumOnly(vs []string) []string {
	var out []string
	for _, v := range vs {
		if l, ok := curriculum.Find(v); ok && l.Quorum {
			out = append(out, v)
		}
	}
	return out
}
