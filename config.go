package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/curriculum"
	"flashsale/handlers"
	"flashsale/internal/cli"
	"flashsale/inventory"
	"flashsale/lock"
)

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
	drain           time.Duration
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
	openLadder          bool
	orderRateRoomOnly   bool // resolved: the order rate spares this machine's own clients
	maxConnsPerClient   int
}

// productionOrderRate is the per-client order rate of -production when
// -order-rate is not given: a person clicks "buy" far less often; a bot
// that tries every few milliseconds is held to it.
const productionOrderRate = 2

// roomOrderRate is the per-client order rate of workshop mode when
// -order-rate is not given, for clients from the room only: enough for a
// person to click through a lab, far too little to flood a SKU; this
// machine's own clients (the load runner, the labs' curl) are not held to
// it.
const roomOrderRate = 5

// minAdminToken is the shortest -admin-token accepted: a generated one has
// 32 hex characters; one a person types has to be long enough that nobody
// in the room guesses it between two failed-login pauses.
const minAdminToken = 16

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

// envDefault is a flag's default: the environment variable env parsed by
// parse when it is set, else def. A value that does not parse is kept in
// errs, so every bad variable is reported at once after the flags.
func envDefault[T any](getenv func(string) string, env string, def T, parse func(string) (T, error), errs *[]error) T {
	v := getenv(env)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("$%s: %w", env, err))
	}
	return x
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
		fs.StringVar(p, flagName, envDefault(getenv, env, def, func(v string) (string, error) { return v, nil }, &envErrs), usage+" ($"+env+")")
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
		fs.DurationVar(p, flagName, envDefault(getenv, env, def, time.ParseDuration, &envErrs), usage+" ($"+env+")")
	}
	boolean := func(p *bool, flagName, env string, def bool, usage string) {
		fs.BoolVar(p, flagName, envDefault(getenv, env, def, strconv.ParseBool, &envErrs), usage+" ($"+env+")")
	}
	integer := func(p *int, flagName, env string, def int, usage string) {
		fs.IntVar(p, flagName, envDefault(getenv, env, def, strconv.Atoi, &envErrs), usage+" ($"+env+")")
	}
	str(&c.addr, "addr", "FLASHSALE_ADDR", "127.0.0.1:8080", "listen address")
	secret(&c.redis, "redis", "FLASHSALE_REDIS", "comma-separated redis:// or rediss:// URLs, one per Redlock node; empty starts local nodes")
	var sentinelURL string
	secret(&sentinelURL, "redis-sentinel", "FLASHSALE_REDIS_SENTINEL", "redis-sentinel://host:port[,host:port…]/mastername: the first node is the master these sentinels name (before the -redis nodes, which may then be empty)")
	str(&c.db, "db", "FLASHSALE_DB", "flashsale.db", "SQLite file, or a postgres:// URL")
	// -h prints the default: a PostgreSQL URL from the environment with its
	// password masked, the same way the log masks it.
	fs.Lookup("db").DefValue = inventory.RedactDSN(c.db)
	secret(&c.adminToken, "admin-token", "FLASHSALE_ADMIN_TOKEN", "bearer token of /api/admin/*; empty generates one and prints it")
	str(&c.lock, "lock", "FLASHSALE_LOCK", lock.Redlock, "lock variant for requests that name none: "+strings.Join(curriculum.Names(), ", "))
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
	dur(&c.drain, "drain", "FLASHSALE_DRAIN", 0, "on shutdown, how long /readyz answers 503 while requests are still served, before the server stops accepting: longer than a load balancer's checks take to mark it down")
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
	fs.Var(&orderRate, "order-rate", fmt.Sprintf("orders and seat grabs a second one client address may send (429 past it); default %d with -production, in workshop mode %d for clients other than this machine's own; 0 off ($FLASHSALE_ORDER_RATE)", productionOrderRate, roomOrderRate))
	integer(&c.orderBurst, "order-burst", "FLASHSALE_ORDER_BURST", handlers.DefaultOrderBurst, "orders one client address may send at once before -order-rate applies")
	dur(&c.bodyTimeout, "body-timeout", "FLASHSALE_BODY_TIMEOUT", handlers.DefaultBodyTimeout, "time a request may take to send its body (408 past it)")
	dur(&c.auditInterval, "audit-interval", "FLASHSALE_AUDIT_INTERVAL", handlers.DefaultAuditInterval, "the public GET /api/audit serves the last audit this long: at most one real audit per interval")
	boolean(&c.openLadder, "open-ladder", "FLASHSALE_OPEN_LADDER", false, "every client may name a broken lock variant in X-Lock-Variant; off, only this machine's own clients (127.0.0.1, ::1) and the admin token may; -production allows none anyway")
	integer(&c.maxConnsPerClient, "max-conns-per-client", "FLASHSALE_MAX_CONNS_PER_CLIENT", defaultMaxConnsPerClient, "open connections one client address may hold (past it the connection gets 429 and is closed); this machine's own and -trusted-proxies are not counted; -1 turns the cap off")
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
	case !slices.Contains(curriculum.Names(), c.lock):
		return c, fmt.Errorf("-lock %q: want one of %s", c.lock, strings.Join(curriculum.Names(), ", "))
	case c.lockTTL <= 0:
		return c, fmt.Errorf("-lock-ttl must be positive, got %v", c.lockTTL)
	case c.drain < 0:
		return c, fmt.Errorf("-drain must not be negative, got %v", c.drain)
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
	case c.adminToken != "" && len(c.adminToken) < minAdminToken:
		return c, fmt.Errorf("-admin-token has %d characters; it needs at least %d, or none for a generated one (anyone on the network may try to guess it)", len(c.adminToken), minAdminToken)
	case c.maxConnsPerClient == 0 || c.maxConnsPerClient < -1:
		return c, fmt.Errorf("-max-conns-per-client must be at least 1, or -1 for no cap, got %d", c.maxConnsPerClient)
	}
	// -production never allows a broken variant: nothing is left to open.
	c.openLadder = c.openLadder && !c.production
	c.orderRate = orderRate.v
	switch {
	case orderRate.set:
	case c.production:
		c.orderRate = productionOrderRate
	default:
		c.orderRate, c.orderRateRoomOnly = roomOrderRate, true
	}
	c.trustedProxies = cli.Split(proxies)
	if err := c.resolveVariants(cli.Split(variants)); err != nil {
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
		c.variants = curriculum.Names()
	}
	for _, v := range c.variants {
		if !slices.Contains(curriculum.Names(), v) {
			return fmt.Errorf("-variants: %q: want names among %s", v, strings.Join(curriculum.Names(), ", "))
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
