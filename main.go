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
	"crypto/rand"
	"encoding/hex"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/handlers"
	"flashsale/internal/broker"
	"flashsale/internal/history"
	"flashsale/internal/localredis"
	"flashsale/inventory"
	"flashsale/loadtest/workshop"
	"flashsale/lock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}

// config is the command line, each flag with an environment fallback.
type config struct {
	addr            string
	redis           string
	sentinel        *redis.FailoverOptions // parsed -redis-sentinel; nil when empty
	db              string
	adminToken      string
	lock            string
	lockTTL         time.Duration
	lockWait        time.Duration
	localNodes      int
	localAOF        bool   // the local nodes keep an append-only file (the persistence lab)
	localFsync      string // their appendfsync policy
	production      bool
	namespace       string
	restartAware    bool
	watchdog        bool
	fast            bool
	batch           bool
	batchMax        int
	shutdownTimeout time.Duration
	logLevel        string
	history         string

	// Limits of a public storefront (docs/operations.md, "Limits").
	variants            []string // resolved: the mode's default when -variants is empty
	maxStreams          int
	maxStreamsPerClient int
	maxInFlight         int
	orderRate           float64 // resolved: the mode's default when -order-rate is not given
	orderBurst          int
	bodyTimeout         time.Duration
	auditInterval       time.Duration
	trustedProxies      []string
}

// productionOrderRate is the per-client order rate of -production when
// -order-rate is not given: a person clicks "buy" far less often; a bot
// that tries every few milliseconds is held to it.
const productionOrderRate = 2

// optionalFloat is a float flag that knows whether it was given, so its
// default can depend on another flag (-order-rate on -production).
type optionalFloat struct {
	v   float64
	set bool
}

func (f *optionalFloat) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.FormatFloat(f.v, 'f', -1, 64)
}

func (f *optionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	f.v, f.set = v, true
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseConfig reads flags, falling back to FLASHSALE_* variables, then to the
// defaults of the public contract. A variable that does not parse is an
// error, not silently ignored.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	name := "flashsale"
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var envErrs []error
	str := func(p *string, flagName, env, def, usage string) {
		if v := getenv(env); v != "" {
			def = v
		}
		fs.StringVar(p, flagName, def, usage+" ($"+env+")")
	}
	// secret takes its environment fallback after parsing, so -h never
	// prints a token or a password from the environment as a default.
	var secrets []func()
	secret := func(p *string, flagName, env, usage string) {
		fs.StringVar(p, flagName, "", usage+" ($"+env+")")
		secrets = append(secrets, func() {
			if *p == "" {
				*p = getenv(env)
			}
		})
	}
	dur := func(p *time.Duration, flagName, env string, def time.Duration, usage string) {
		if v := getenv(env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Errorf("$%s: %w", env, err))
			}
			def = d
		}
		fs.DurationVar(p, flagName, def, usage+" ($"+env+")")
	}
	boolean := func(p *bool, flagName, env string, def bool, usage string) {
		if v := getenv(env); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Errorf("$%s: %w", env, err))
			}
			def = b
		}
		fs.BoolVar(p, flagName, def, usage+" ($"+env+")")
	}
	integer := func(p *int, flagName, env string, def int, usage string) {
		if v := getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Errorf("$%s: %w", env, err))
			}
			def = n
		}
		fs.IntVar(p, flagName, def, usage+" ($"+env+")")
	}
	str(&c.addr, "addr", "FLASHSALE_ADDR", "127.0.0.1:8080", "listen address")
	secret(&c.redis, "redis", "FLASHSALE_REDIS", "comma-separated redis:// or rediss:// URLs, one per Redlock node; empty starts local nodes")
	var sentinelURL string
	secret(&sentinelURL, "redis-sentinel", "FLASHSALE_REDIS_SENTINEL", "redis-sentinel://host:port[,host:port…]/mastername: the first node is the master these sentinels name (before the -redis nodes, which may then be empty)")
	str(&c.db, "db", "FLASHSALE_DB", "flashsale.db", "SQLite file, or a postgres:// URL")
	secret(&c.adminToken, "admin-token", "FLASHSALE_ADMIN_TOKEN", "bearer token of /api/admin/*; empty generates one and prints it")
	str(&c.lock, "lock", "FLASHSALE_LOCK", lock.Redlock, "lock variant for requests that name none: "+strings.Join(lock.Names(), ", "))
	dur(&c.lockTTL, "lock-ttl", "FLASHSALE_LOCK_TTL", 2*time.Second, "lease time to live")
	dur(&c.lockWait, "lock-wait", "FLASHSALE_LOCK_WAIT", time.Second, "how long a request waits for a busy lock before 503")
	integer(&c.localNodes, "local-nodes", "FLASHSALE_LOCAL_NODES", 5, "local Redis nodes to start when -redis is empty")
	boolean(&c.localAOF, "local-aof", "FLASHSALE_LOCAL_AOF", false, "the local nodes keep an append-only file, so one killed and started again has its keys back; off, it comes back empty")
	str(&c.localFsync, "local-fsync", "FLASHSALE_LOCAL_FSYNC", "everysec", "appendfsync of the local nodes with -local-aof: always, everysec or no")
	boolean(&c.production, "production", "FLASHSALE_PRODUCTION", false, "add database guards (conditional update, unique booking) on top of the lock")
	str(&c.namespace, "namespace", "FLASHSALE_NAMESPACE", "flashsale:", "prefix of every Redis key and channel")
	boolean(&c.restartAware, "restart-aware", "FLASHSALE_RESTART_AWARE", true, "Redlock ignores a restarted node for one TTL and re-seeds its fencing counters")
	boolean(&c.watchdog, "watchdog", "FLASHSALE_WATCHDOG", false, "leases extend themselves every TTL/3 until released")
	boolean(&c.fast, "fast", "FLASHSALE_FAST", true, "the locks' speed layer (waiting line, wake-ups, hand-over, ordered release, early busy answer); false runs exactly the taught code")
	boolean(&c.batch, "batch", "FLASHSALE_BATCH", false, "the orders for one SKU that wait while its lock is busy here are served by the next lease in one transaction")
	integer(&c.batchMax, "batch-max", "FLASHSALE_BATCH_MAX", inventory.DefaultBatchMax, "most orders one lease serves with -batch")
	dur(&c.shutdownTimeout, "shutdown-timeout", "FLASHSALE_SHUTDOWN_TIMEOUT", 20*time.Second, "how long in-flight requests may take to finish on shutdown")
	str(&c.logLevel, "log-level", "FLASHSALE_LOG_LEVEL", "info", "debug, info, warn or error")
	str(&c.history, "history", "FLASHSALE_HISTORY", "", "append every lease and store write to this JSON-lines file, for the chaos checker; empty records none")
	var variants, proxies string
	var orderRate optionalFloat
	str(&variants, "variants", "FLASHSALE_VARIANTS", "", "comma-separated lock variants requests may name in X-Lock-Variant; empty: every variant, or with -production only -lock (-production allows only "+strings.Join(handlers.CorrectVariants(), ", ")+")")
	integer(&c.maxStreams, "max-streams", "FLASHSALE_MAX_STREAMS", handlers.DefaultMaxStreams, "open server-sent event streams this instance serves at most (503 past it)")
	integer(&c.maxStreamsPerClient, "max-streams-per-client", "FLASHSALE_MAX_STREAMS_PER_CLIENT", handlers.DefaultMaxStreamsPerClient, "open streams one client address may hold (429 past it)")
	integer(&c.maxInFlight, "max-in-flight", "FLASHSALE_MAX_IN_FLIGHT", handlers.DefaultMaxInFlight, "orders and seat grabs this instance works on at once (503 overloaded past it, at once); -1 turns the bound off")
	if v := getenv("FLASHSALE_ORDER_RATE"); v != "" {
		if err := orderRate.Set(v); err != nil {
			envErrs = append(envErrs, fmt.Errorf("$FLASHSALE_ORDER_RATE: %w", err))
		}
	}
	fs.Var(&orderRate, "order-rate", fmt.Sprintf("orders and seat grabs a second one client address may send (429 past it); 0 turns the limit off; default %d with -production, off in workshop mode ($FLASHSALE_ORDER_RATE)", productionOrderRate))
	integer(&c.orderBurst, "order-burst", "FLASHSALE_ORDER_BURST", handlers.DefaultOrderBurst, "orders one client address may send at once before -order-rate applies")
	dur(&c.bodyTimeout, "body-timeout", "FLASHSALE_BODY_TIMEOUT", handlers.DefaultBodyTimeout, "time a request may take to send its body (408 past it)")
	dur(&c.auditInterval, "audit-interval", "FLASHSALE_AUDIT_INTERVAL", handlers.DefaultAuditInterval, "the public GET /api/audit serves the last audit this long: at most one real audit per interval")
	str(&proxies, "trusted-proxies", "FLASHSALE_TRUSTED_PROXIES", "", "comma-separated addresses or CIDR ranges of proxies whose X-Forwarded-For names the client; empty: the client is the peer address")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, fill := range secrets {
		fill()
	}
	if err := errors.Join(envErrs...); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if sentinelURL != "" {
		var err error
		if c.sentinel, err = sentinelOptions(sentinelURL); err != nil {
			return c, fmt.Errorf("-redis-sentinel: %w", err)
		}
	}
	switch {
	case !slices.Contains(lock.Names(), c.lock):
		return c, fmt.Errorf("-lock %q: want one of %s", c.lock, strings.Join(lock.Names(), ", "))
	case c.lockTTL <= 0:
		return c, fmt.Errorf("-lock-ttl must be positive, got %v", c.lockTTL)
	case c.lockWait <= 0:
		return c, fmt.Errorf("-lock-wait must be positive, got %v", c.lockWait)
	case c.batchMax < 1:
		return c, fmt.Errorf("-batch-max must be at least 1, got %d", c.batchMax)
	case c.redis == "" && c.sentinel == nil && (c.localNodes < 1 || c.localNodes > 99):
		return c, fmt.Errorf("-local-nodes must be between 1 and 99, got %d", c.localNodes)
	case !slices.Contains([]string{"always", "everysec", "no"}, c.localFsync):
		return c, fmt.Errorf("-local-fsync %q: want always, everysec or no", c.localFsync)
	case c.db == "":
		return c, errors.New("-db must not be empty")
	case c.maxStreams < 1 || c.maxStreamsPerClient < 1:
		return c, fmt.Errorf("-max-streams and -max-streams-per-client must be at least 1, got %d and %d", c.maxStreams, c.maxStreamsPerClient)
	case c.maxInFlight == 0 || c.maxInFlight < -1:
		return c, fmt.Errorf("-max-in-flight must be at least 1, or -1 for no bound, got %d", c.maxInFlight)
	case orderRate.set && orderRate.v < 0:
		return c, fmt.Errorf("-order-rate must not be negative, got %v", orderRate.v)
	case c.orderBurst < 1:
		return c, fmt.Errorf("-order-burst must be at least 1, got %d", c.orderBurst)
	case c.bodyTimeout <= 0:
		return c, fmt.Errorf("-body-timeout must be positive, got %v", c.bodyTimeout)
	case c.auditInterval <= 0:
		return c, fmt.Errorf("-audit-interval must be positive, got %v", c.auditInterval)
	}
	c.orderRate = orderRate.v
	if !orderRate.set && c.production {
		c.orderRate = productionOrderRate
	}
	c.trustedProxies = splitList(proxies)
	if err := c.resolveVariants(splitList(variants)); err != nil {
		return c, err
	}
	return c, nil
}

// resolveVariants sets the variants requests may name. Workshop mode allows
// every one by default, since the workshop compares them; -production only
// the correct ones, by default just -lock: a shopper must not be able to
// pick `none`, or `setnx-expire` and hang up between its two steps to wedge
// a SKU.
func (c *config) resolveVariants(named []string) error {
	correct := handlers.CorrectVariants()
	switch {
	case len(named) > 0:
		c.variants = named
	case c.production:
		c.variants = []string{c.lock}
	default:
		c.variants = lock.Names()
	}
	for _, v := range c.variants {
		if !slices.Contains(lock.Names(), v) {
			return fmt.Errorf("-variants: %q: want names among %s", v, strings.Join(lock.Names(), ", "))
		}
		if c.production && !slices.Contains(correct, v) {
			return fmt.Errorf("-production allows only the correct variants (%s); %q is broken (-lock, -variants)", strings.Join(correct, ", "), v)
		}
	}
	if !slices.Contains(c.variants, c.lock) {
		return fmt.Errorf("-variants %s must include -lock %q", strings.Join(c.variants, ","), c.lock)
	}
	return nil
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

	nodes, nodeURLs, stopNodes, err := redisNodes(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopNodes()

	token := cfg.adminToken
	if token == "" {
		token = randomToken()
		fmt.Fprintf(stdout, "admin token (generated; set -admin-token or FLASHSALE_ADMIN_TOKEN to choose one): %s\n", token)
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
	lockers, err := lock.NewLockers(nodes, lock.WithSentinel(cfg.sentinel),
		lock.WithTTL(cfg.lockTTL), lock.WithNamespace(cfg.namespace), lock.WithLogger(log),
		lock.WithRestartAwareness(cfg.restartAware), lock.WithWatchdog(cfg.watchdog), lock.WithFast(cfg.fast),
		lock.WithObserver(func(e lock.Event) { metrics.ObserveLock(e); runs.Observe(e); hist.Lock(e) }))
	if err != nil {
		return err
	}
	defer lockers.Close()

	db, err := inventory.Open(ctx, cfg.db, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := inventory.Close(db); err != nil {
			log.Warn("closing the database", "err", err)
		}
	}()
	if inventory.IsPostgres(cfg.db) {
		log.Info("database: PostgreSQL")
	} else {
		log.Info("database: SQLite", "file", cfg.db)
	}

	live := broker.New(lockers.Clients(), cfg.namespace, log, metrics.StreamDropped)
	svc, err := inventory.New(ctx, db, lockers, inventory.Config{
		Production: cfg.production, LockWait: cfg.lockWait, Logger: log, Batch: cfg.batch, BatchMax: cfg.batchMax,
		Notify: func(c inventory.Change) { live.Publish(c); hist.Change(c) },
	})
	if err != nil {
		return err
	}
	metrics.WatchInventory(svc)

	srv, err := handlers.NewServer(handlers.Config{
		Inventory: svc, Lockers: lockers, Metrics: metrics, Broker: live,
		AdminToken: token, DefaultLock: cfg.lock, Logger: log, Workshop: runs,
		Variants: cfg.variants, MaxStreams: cfg.maxStreams, MaxStreamsPerClient: cfg.maxStreamsPerClient, MaxInFlight: cfg.maxInFlight,
		OrderRate: cfg.orderRate, OrderBurst: cfg.orderBurst, BodyTimeout: cfg.bodyTimeout,
		AuditInterval: cfg.auditInterval, TrustedProxies: cfg.trustedProxies,
	})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	// Requests get a context of their own that shutdown does not cancel, so
	// an in-flight sale finishes; only a shutdown that runs out of time
	// cancels it (and the sale then releases its lease on the way out).
	baseCtx, abortRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer abortRequests()
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
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
		"production", cfg.production, "redis_nodes", len(lockers.Clients()), "redis_sentinel", cfg.sentinel != nil, "variants", strings.Join(cfg.variants, ","),
		"order_rate", cfg.orderRate, "max_streams", cfg.maxStreams)
	fmt.Fprintf(stdout, "listening on %s\n", url)

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
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

// redisNodes parses -redis, or starts local nodes when it is empty; stop
// stops the nodes it started (and does nothing for nodes given by URL).
func redisNodes(ctx context.Context, cfg config, log *slog.Logger) (opts []*redis.Options, urls []string, stop func(), err error) {
	if cfg.redis != "" || cfg.sentinel != nil {
		for _, u := range strings.Split(cfg.redis, ",") {
			if u = strings.TrimSpace(u); u == "" {
				continue
			}
			o, err := redis.ParseURL(u)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("-redis: %w", err)
			}
			opts, urls = append(opts, o), append(urls, u)
		}
		if len(opts) == 0 && cfg.sentinel == nil {
			return nil, nil, nil, errors.New("-redis: no URL given")
		}
		return opts, urls, func() {}, nil
	}
	cluster, err := localredis.Start(ctx, cfg.localNodes, localredis.Options{Logger: log, AOF: cfg.localAOF, AppendFsync: cfg.localFsync})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start local Redis nodes: %w", err)
	}
	kind := "redis-server processes"
	if cluster.InProcess() {
		kind = "in-process (miniredis) nodes; install redis-server for real ones"
	}
	log.Info("no -redis given: started local Redis nodes", "kind", kind, "addrs", strings.Join(cluster.Addrs(), ","))
	if cfg.restartAware && !cluster.InProcess() {
		// Restart awareness keeps a node out of Redlock's quorums until its
		// uptime reaches the TTL: a node cannot tell a first start from a
		// restart that lost its data. Serve once they can vote.
		age := lock.MinUptime(cfg.lockTTL)
		log.Info("new Redis nodes sit out their first lock TTL before they vote; waiting", "for", age)
		actx, cancel := context.WithTimeout(ctx, age+10*time.Second)
		err := cluster.Aged(actx, age)
		cancel()
		if err != nil {
			return nil, nil, nil, errors.Join(fmt.Errorf("local Redis nodes: %w", err), cluster.Stop())
		}
	}
	for _, u := range cluster.URLs() {
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, nil, nil, errors.Join(err, cluster.Stop())
		}
		opts = append(opts, o)
	}
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	keepUp(keepCtx, cluster, log)
	return opts, cluster.URLs(), func() {
		stopKeeping()
		if err := cluster.Stop(); err != nil {
			log.Warn("stopping local Redis nodes", "err", err)
		}
	}, nil
}

// keepUp starts a local node that died (a kill -9, as in the persistence
// lab) again on its own port and data directory, as a service manager
// would: with -local-aof it comes back with the keys its file holds,
// without it empty, and restart awareness keeps it out of quorums for a
// TTL either way. It stops when ctx ends, before the cluster is stopped.
func keepUp(ctx context.Context, cluster *localredis.Cluster, log *slog.Logger) {
	for _, n := range cluster.Nodes {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-n.Exited():
				}
				if ctx.Err() != nil {
					return
				}
				log.Warn("local Redis node exited; starting it again on its own files", "node", n.Index(), "addr", n.Addr())
				if err := n.Start(ctx); err != nil {
					log.Error("local Redis node did not come back", "node", n.Index(), "err", err)
					return
				}
			}
		}()
	}
}

// randomToken is a 128-bit admin token.
func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
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
