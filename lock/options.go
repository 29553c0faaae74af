package lock

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/lock/internal/node"
)

// config is what every Locker of one Lockers set shares.
type config struct {
	ttl           time.Duration
	nodeTimeout   time.Duration
	namespace     string
	watchdog      atomic.Bool // switched at run time (Lockers.SetWatchdog)
	fast          atomic.Bool // the speed layer, switched at run time (Lockers.SetFast)
	restartAware  bool
	notifications bool
	backoffMin    time.Duration
	backoffMax    time.Duration
	faults        *fault.Plan
	observer      func(Event)
	logger        *slog.Logger
	sentinel      *redis.FailoverOptions
}

func defaultConfig() *config {
	c := &config{
		ttl:           2 * time.Second,
		namespace:     "flashsale:",
		restartAware:  true,
		notifications: true,
		backoffMin:    time.Millisecond,
		faults:        fault.NewPlan(),
		logger:        slog.Default(),
	}
	c.fast.Store(true)
	return c
}

// nodeConfig is what the nodes need of c, once NewLockers has settled it.
func (c *config) nodeConfig() *node.Config {
	return &node.Config{
		TTL: c.ttl, Timeout: c.nodeTimeout, Namespace: c.namespace, RestartAware: c.restartAware,
		SitOut: sitOut, Logger: c.logger,
		// Keyspace notifications are the speed layer's waking.
		Notify: func() bool { return c.notifications && c.fast.Load() },
	}
}

// lateWindow is how long a silent node still counts as up but late
// (node.LateWindow).
func (c *config) lateWindow() time.Duration { return node.LateWindow(c.nodeTimeout, c.ttl) }

// MinUptime is the uptime a node must report (INFO uptime_in_seconds) before
// it may vote in a Redlock whose largest TTL is ttl: TTL + drift, plus the
// second by which a whole-second uptime can overstate the real one.
func MinUptime(ttl time.Duration) time.Duration { return sitOut(ttl) + time.Second }

// sitOut is how long a node whose data lost keys stays out, for a largest
// TTL in use of ttl.
func sitOut(ttl time.Duration) time.Duration { return ttl + drift(ttl) }

// Option configures a Lockers set.
type Option func(*config)

// WithTTL sets the lease time to live. Default 2s.
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithNodeTimeout bounds each call to one Redis node during a Redlock
// acquire, so a dead node costs at most this much. Default TTL/20, at
// least 50 ms (and at most TTL/3).
func WithNodeTimeout(d time.Duration) Option { return func(c *config) { c.nodeTimeout = d } }

// WithNamespace prefixes every Redis key the locks use. Default "flashsale:".
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithWatchdog makes every lease extend itself at a third of its TTL until it
// is released, and report through Lease.Lost when it could not. Default off;
// Lockers.SetWatchdog switches it later.
func WithWatchdog(on bool) Option { return func(c *config) { c.watchdog.Store(on) } }

// WithRestartAwareness makes Redlock ignore a node that just restarted (or
// just started) until every lease its previous incarnation can have granted
// has run out, a bit more than the largest TTL any client of it uses, and
// re-seed a node's fencing counters from the other nodes once per
// incarnation before it counts (docs/design.md says how). Default on; turn it
// off only to show the double grant it prevents.
func WithRestartAwareness(on bool) Option { return func(c *config) { c.restartAware = on } }

// WithFast switches the speed layer on or off. Off, every variant
// runs exactly its taught code: a waiter retries after a random delay, a
// release is the variant's own, nothing listens for wake-ups and the app
// sets no keyspace notifications. Redlock's votes travel on their pipelined
// connections either way (internal/node says why). Default on; Lockers.SetFast
// switches it later.
func WithFast(on bool) Option { return func(c *config) { c.fast.Store(on) } }

// WithNotifications turns waking waiters by keyspace notifications, and the
// waiting line across processes, on or off: off, the speed layer's waiters
// fall back to the jittered backoff. It matters only while the speed layer
// is on: off, neither runs whatever this says. Default on.
func WithNotifications(on bool) Option { return func(c *config) { c.notifications = on } }

// WithBackoff bounds the fallback retry delay of a waiting Acquire: it starts
// at min and doubles, with jitter, up to max (default TTL/8).
func WithBackoff(min, max time.Duration) Option {
	return func(c *config) { c.backoffMin, c.backoffMax = min, max }
}

// WithFaults shares a fault plan with every variant. Default: an empty plan.
func WithFaults(f *fault.Plan) Option { return func(c *config) { c.faults = f } }

// WithObserver receives an Event for every acquire, release, lost lease and
// fired fault; it must not block. It may read the event's Lease (its
// validity): no event is sent with the lease's state locked.
func WithObserver(fn func(Event)) Option { return func(c *config) { c.observer = fn } }

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithSentinel puts a Sentinel-managed master in front of the nodes given
// to NewLockers: it is the first node (the single-node variants' only one,
// and one Redlock vote), reached as whichever server fo's sentinels name
// as master now. The nodes given may then be none. A nil fo is no
// Sentinel-managed node.
func WithSentinel(fo *redis.FailoverOptions) Option { return func(c *config) { c.sentinel = fo } }
