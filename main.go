// Command flashsale is the flash-sale storefront: the shopper and admin HTTP
// API over a SQL database, every stock decrement and seat grab under a Redis
// lock whose variant — broken or correct — is picked per request.
//
// With no -redis it starts local Redis nodes itself (redis-server processes
// when installed, else in-process ones) and with no -db it uses a SQLite
// file, so `go run .` serves a working storefront on a bare machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"flashsale/handlers"
	"flashsale/internal/broker"
	"flashsale/internal/cli"
	"flashsale/internal/fault"
	"flashsale/internal/history"
	"flashsale/internal/locktap"
	"flashsale/inventory"
	"flashsale/loadtest/workshop"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

func main() {
	cli.LessGC(os.Getenv) // GOGC, when set, wins
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}

// run is the whole program: it serves until ctx is done, then shuts down
// gracefully — stop accepting, let in-flight sales finish and release their
// leases, end the live streams, stop the local nodes it started, close the
// database. It prints "listening on http://ADDR" to stdout once it listens.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	nodes, nodeURLs, stopNodes, err := redisNodes(ctx, &cfg, log)
	if err != nil {
		return err
	}
	defer stopNodes()

	token, said, err := keptAdminToken(cfg.adminToken, cfg.db)
	if err != nil {
		return err
	}
	if said != "" {
		fmt.Fprintln(stdout, said)
	}
	var hist *history.Recorder // nil records nothing
	if cfg.history != "" {
		if hist, err = history.Open(cfg.history); err != nil {
			return err
		}
		defer func() {
			if err := hist.Close(); err != nil {
				log.Warn("history", "err", err)
			}
		}()
	}
	metrics := handlers.NewMetrics()
	runs := workshop.NewRunner(token, nodeURLs, cfg.lockTTL, log)
	if self, ok := sequenceEnvironment(cfg); ok {
		runs.UseOwnEnvironment(self)
	}
	opts := lock.Options{
		Sentinel: cfg.sentinel, TTL: cfg.lockTTL, Namespace: cfg.namespace, Logger: log,
		RestartAwarenessOff: !cfg.restartAware, Watchdog: cfg.watchdog, FastOff: !cfg.fast,
	}
	faults := fault.NewPlan()
	opts = locktap.Tapped(opts, locktap.Tap{Faults: faults, Observer: func(e locktap.Event) {
		metrics.ObserveLock(e)
		runs.Observe(e)
		recordLease(hist, e)
	}})
	lockers, err := lock.New(nodes, inventory.With(ladder.With(opts)))
	if err != nil {
		return err
	}
	defer lockers.Close()

	if err := privateDatabase(cfg.db); err != nil {
		return err
	}
	db, err := inventory.Open(ctx, cfg.db, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := inventory.Close(db); err != nil {
			log.Warn("closing the database", "err", err)
		}
	}()
	reads, err := inventory.OpenReads(ctx, cfg.db, log)
	if err != nil {
		return err
	}
	if reads != nil {
		defer func() {
			if err := inventory.Close(reads); err != nil {
				log.Warn("closing the database's read pool", "err", err)
			}
		}()
	}
	if inventory.IsPostgres(cfg.db) {
		log.Info("database: PostgreSQL")
	} else {
		log.Info("database: SQLite", "file", cfg.db)
	}

	rdbs := nodeClients(nodes, cfg.sentinel)
	defer func() {
		for _, c := range rdbs {
			_ = c.Close()
		}
	}()
	live := broker.New(rdbs, cfg.namespace, log, metrics.StreamDropped)
	svc, err := inventory.New(ctx, db, lockers, inventory.Config{
		Nodes: rdbs, Namespace: cfg.namespace, Production: cfg.production, LockWait: cfg.lockWait, Logger: log, Batch: cfg.batch, BatchMax: cfg.batchMax, Reads: reads,
		Notify: func(c inventory.Change) { live.Publish(c); hist.Change(history.Change(c)) },
	})
	if err != nil {
		return err
	}
	metrics.WatchInventory(svc)

	srv, err := handlers.NewServer(handlers.Config{
		Inventory: svc, Lockers: lockers, Faults: faults, LockTTL: cfg.lockTTL, Watchdog: cfg.watchdog, FastOff: !cfg.fast, Metrics: metrics, Broker: live,
		AdminToken: token, DefaultLock: cfg.lock, LockWait: cfg.lockWait, Logger: log, Workshop: runs,
		Variants: cfg.variants, MaxStreams: cfg.maxStreams, MaxStreamsPerClient: cfg.maxStreamsPerClient,
		MaxInFlight: cfg.maxInFlight, InFlightTarget: cfg.lockWait / 4,
		OrderRate: cfg.orderRate, OrderBurst: cfg.orderBurst, BodyTimeout: cfg.bodyTimeout,
		AuditInterval: cfg.auditInterval, TrustedProxies: cfg.trustedProxies, LockSource: lockSource(),
		OpenLadder: cfg.openLadder, OrderRateSparesOwnMachine: cfg.orderRateRoomOnly,
	})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	capped, err := capConns(ln, cfg.maxConnsPerClient, cfg.trustedProxies, func() { metrics.Refused("too_many_connections") }, log)
	if err != nil {
		ln.Close()
		return fmt.Errorf("-trusted-proxies: %w", err)
	}
	ln = capped
	// Requests get a context of their own that shutdown does not cancel, so
	// an in-flight sale finishes; only a shutdown that runs out of time
	// cancels it (and the sale then releases its lease on the way out).
	baseCtx, abortRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer abortRequests()
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 5 * time.Second,
		// A whole answer, body read included: the slowest sale waits for
		// its lock, then does the longest work an admin may set. Streams
		// move their own deadline before each write (handlers.StreamWriteWindow).
		WriteTimeout: cfg.bodyTimeout + 2*cfg.lockWait + handlers.MaxWork + 30*time.Second,
		IdleTimeout:  60 * time.Second,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:  func(net.Listener) context.Context { return baseCtx },
	}
	hs.RegisterOnShutdown(srv.CloseStreams) // the live streams and the workshop's

	brokerCtx, stopBroker := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	bg.Go(func() { live.Run(brokerCtx) })
	defer func() { stopBroker(); bg.Wait() }()

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	runs.SetBase(url)
	log.Info("listening", "addr", ln.Addr().String(), "lock", cfg.lock, "lock_ttl", cfg.lockTTL, "lock_wait", cfg.lockWait,
		"production", cfg.production, "redis_nodes", len(rdbs), "redis_sentinel", cfg.sentinel != nil, "variants", strings.Join(cfg.variants, ","),
		"order_rate", cfg.orderRate, "max_streams", cfg.maxStreams)
	fmt.Fprintf(stdout, "listening on %s\n", url)

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	drain(srv, hs, cfg.drain, log)
	log.Info("shutting down: no new connections; waiting for in-flight requests", "timeout", cfg.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("in-flight requests did not finish in time; aborting them", "err", err)
		abortRequests()
		_ = hs.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("serve", "err", err)
	}
	log.Info("stopped")
	return nil
}

// drain tells a load balancer this instance is going (/readyz 503) and
// keeps serving for wait, so the balancer's health checks take it out of
// rotation before it stops accepting. Keep-alives end meanwhile: each
// answer closes its connection, so no pooled connection of the balancer
// meets a closed listener later.
func drain(srv *handlers.Server, hs *http.Server, wait time.Duration, log *slog.Logger) {
	srv.Drain()
	if wait <= 0 {
		return
	}
	hs.SetKeepAlivesEnabled(false)
	log.Info("draining: /readyz answers 503; still serving", "drain", wait)
	time.Sleep(wait)
}

// sequenceEnvironment is this binary, when the workshop's sequence may run
// in Redis nodes and app instances of its own (node scenarios included):
// only when this instance started its own redis-server nodes (no -redis), so
// the machine has redis-server and nobody else's Redis is touched.
func sequenceEnvironment(cfg config) (string, bool) {
	if cfg.redis != "" {
		return "", false
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return "", false
	}
	self, err := os.Executable()
	return self, err == nil
}
