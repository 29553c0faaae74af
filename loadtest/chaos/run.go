package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"flashsale/curriculum"
	"flashsale/internal/clock"
	"flashsale/loadtest/checker"
	"flashsale/loadtest/cluster"
	"flashsale/loadtest/output"
	"flashsale/loadtest/storefront"
)

// Run starts the environment, runs the clients and the nemesis for
// the configured duration, heals everything, and judges every variant
// with the checker. It fails only when it could not run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{
		Seed: cfg.Seed, Duration: cfg.Duration.String(), Faults: cfg.Faults, Instances: cfg.Local.Instances,
		Nodes: cfg.Local.Nodes, LockTTL: cfg.LockTTL.String(), Variants: map[string]*Variant{},
		Started: time.Now(), order: cfg.Variants,
	}
	if cfg.Batch {
		rep.Notes = append(rep.Notes, "-batch: orders batched under one lease on every instance")
	}
	if cfg.Taught {
		rep.Notes = append(rep.Notes, "-fast=false: the locks' speed layer off on every instance")
	}
	if cfg.Unaware {
		rep.Notes = append(rep.Notes, "-restart-aware=false: Redlock counts a node that lost its data at once")
	}
	local, err := cluster.StartLocal(ctx, cfg.Local)
	if err != nil {
		return nil, err
	}
	defer func() {
		if local != nil {
			_ = local.Close()
		}
	}()
	if slices.Contains(cfg.Faults, NodeFailover) {
		// For the whole run: the fault fails node 0 over again and again.
		if err := local.Use(ctx, cluster.AppSettings{Failover: true}); err != nil {
			return nil, fmt.Errorf("node 0 behind Sentinel: %w", err)
		}
		rep.Notes = append(rep.Notes, "node-failover: node 0 is a Sentinel-managed master with one replica for the whole run, reached through the sentinels; "+
			"network faults, node crashes and node pauses leave it alone")
	}
	fleet := storefront.NewFleet(local.Bases(), local.Token())
	scopes, plan, err := setUpSale(ctx, cfg, fleet)
	if err != nil {
		return nil, err
	}

	clientLog, err := os.Create(filepath.Join(cfg.OutDir, "client.jsonl"))
	if err != nil {
		return nil, err
	}
	nlog, err := openNemesisLog(filepath.Join(cfg.OutDir, "nemesis.jsonl"))
	if err != nil {
		clientLog.Close()
		return nil, err
	}
	rep.Schedule = Schedule(cfg.Seed, cfg.Duration, cfg.LockTTL, cfg.Faults, cfg.Local.Instances, cfg.Local.Nodes)
	hs, err := newHistories(ctx, fleet[0], scopes)
	if err != nil {
		clientLog.Close()
		return nil, fmt.Errorf("reading the stock the sale starts with: %w", err)
	}
	cl := &clients{bases: local.Bases(), token: local.Token(), out: clientLog, counts: map[string]map[string]int{}, requests: map[string]*atomic.Int64{}, histories: hs}
	n := &nemesis{local: local, plan: plan, pattern: cluster.DefaultLockPattern, log: nlog, logger: cfg.Logger, sentinel: local.Sentinel(),
		recovery: newRecoveries(ctx, cfg.LockTTL)}
	rep.RunStart = attack(ctx, cfg, cl, n, rep.Schedule, scopes)

	rep.StuckLockKeys = rep.heal(ctx, cfg, local)
	if rec := n.recovery.wait(); len(rec) > 0 { // before the nodes stop
		rep.OperatorRecovery, rep.RecoverySummary = rec, summarize(rec, cfg.LockTTL)
	}
	readInto(ctx, fleet[0], hs, scopes, event(scopes)) // what the sale left, after every answer
	for _, h := range hs {
		h.Resolve(func(user string) (int, error) { return fleet[0].Orders(ctx, user) })
	}
	closeErr := local.Close() // the instances stop: their histories are complete
	local = nil
	if err := errors.Join(closeErr, clientLog.Close(), nlog.close()); err != nil {
		rep.Notes = append(rep.Notes, "closing: "+err.Error())
	}

	rep.Nemesis = nlog.events
	for _, v := range cfg.Variants {
		exp, by := Expected(v, cfg.Faults, cfg.Unaware)
		rep.Variants[v] = &Variant{
			Expected: exp, ExpectedBreakers: by, NemesisEvents: nlog.counts,
			Requests: int(cl.requests[v].Load()), Answers: cl.counts[v], Scope: scopes[v],
			Unanswered: cl.hangs[v], UnansweredNamed: cl.unanswered[v],
		}
	}
	if err := rep.judge(ctx, cfg.OutDir); err != nil {
		return nil, err
	}
	rep.checkHistories(hs, cfg.OutDir)
	rep.Finished = time.Now()
	return rep, nil
}

// setUpSale starts a sale with SKUs and seats for each variant, each
// variant's its own, and gives every instance the run's fault plan.
func setUpSale(ctx context.Context, cfg Config, fleet storefront.Fleet) (map[string]checker.Scope, storefront.FaultPlan, error) {
	setup, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	plan := storefront.FaultPlan{Seed: cfg.Seed, WorkMS: cfg.WorkMS, Batch: &cfg.Batch}
	if cfg.Taught {
		plan.Fast = new(bool)
	}
	cat := storefront.Catalogue{Seats: min(1000, 120*len(cfg.Variants))}
	scarce := max(20, cfg.Rate*int(cfg.Duration.Seconds())/40)
	for _, v := range cfg.Variants {
		f := output.FileName(v)
		cat.Products = append(cat.Products,
			storefront.Product{SKU: "hot-" + f, Name: "Hot " + v, PriceCents: 999, Stock: 1_000_000},
			storefront.Product{SKU: "scarce-" + f, Name: "Scarce " + v, PriceCents: 4999, Stock: int64(scarce)})
	}
	state, err := fleet.ResetSale(setup, cat)
	if err != nil {
		return nil, plan, err
	}
	seats, err := fleet[0].Seats(setup, state.Event)
	if err != nil {
		return nil, plan, err
	}
	per := len(seats) / len(cfg.Variants)
	scopes := map[string]checker.Scope{}
	for i, v := range cfg.Variants {
		f := output.FileName(v)
		rung, _ := curriculum.Find(v)
		scopes[v] = checker.Scope{Variant: v, SKUs: []string{"hot-" + f, "scarce-" + f}, Event: state.Event, Seats: seats[i*per : (i+1)*per],
			StoreGuarded: rung.StoreGuarded}
	}
	return scopes, plan, fleet.SetFaults(setup, plan)
}

// attack runs the clients and the nemesis side by side for the run's
// duration, and returns when it started.
func attack(ctx context.Context, cfg Config, cl *clients, n *nemesis, schedule []NemesisEvent, scopes map[string]checker.Scope) time.Time {
	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	start := time.Now()
	n.recovery.end = start.Add(cfg.Duration)
	var wg sync.WaitGroup
	wg.Go(func() { n.run(runCtx, start, schedule) })
	for _, v := range cfg.Variants {
		cl.requests[v] = &atomic.Int64{}
	}
	wg.Go(func() {
		readDuring(runCtx, storefront.NewFleet(cl.bases, cl.token), cl.histories, scopes, event(scopes))
	})
	for i, v := range cfg.Variants {
		sc := scopes[v]
		wg.Go(func() { cl.buy(runCtx, v, sc.SKUs, cfg.Rate, cfg.MultiShare, cfg.Seed+uint64(i)) })
		wg.Go(func() { cl.grab(runCtx, v, sc.Event, sc.Seats, cfg.Duration) })
	}
	wg.Wait()
	cfg.Logger.Info("clients and nemesis done; healing", "elapsed", time.Since(start).Round(time.Second))
	return start
}

// event is the run's event: every variant's seats are of the one event.
func event(scopes map[string]checker.Scope) string {
	for _, sc := range scopes {
		return sc.Event
	}
	return ""
}

// heal brings every node, link and instance back, lets every lease run
// out, and returns the lock keys still there without a TTL.
func (r *Report) heal(ctx context.Context, cfg Config, local *cluster.Local) []string {
	after, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	heal := []error{local.Nodes().Heal(after), local.Network().Heal(after)}
	for i := range cfg.Local.Instances {
		if local.Running(i) {
			heal = append(heal, local.ResumeApp(i))
		} else {
			heal = append(heal, local.RestartApp(after, i))
		}
	}
	if err := errors.Join(heal...); err != nil {
		r.Notes = append(r.Notes, "healing after the run: "+err.Error())
	}
	clock.Sleep(after, 3*cfg.LockTTL)
	urls := local.RedisURLs()
	if sc := local.Sentinel(); sc != nil {
		master, err := sc.Master(after)
		if err != nil {
			r.Notes = append(r.Notes, "stuck-lock scan of node 0: "+err.Error())
		} else {
			urls = append(urls, master.URL())
		}
	}
	stuck, err := cluster.ScanStuckLocks(after, urls, cluster.DefaultLockPattern)
	if err != nil {
		r.Notes = append(r.Notes, "stuck-lock scan: "+err.Error())
	}
	var keys []string
	for _, s := range stuck {
		keys = append(keys, s.Key)
	}
	return keys
}
