package lock

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
	"flashsale/lock/internal/node"
)

// Options configures a set of lockers. The zero value is a working
// configuration: every field left zero takes the default its comment gives.
type Options struct {
	// TTL is the lease time to live. Default 2s.
	TTL time.Duration
	// NodeTimeout bounds each call to one Redis node during a Redlock
	// acquire, so a dead node costs at most this much. Default TTL/20, at
	// least 50 ms (and at most TTL/3).
	NodeTimeout time.Duration
	// Namespace prefixes every Redis key the locks use. Default "flashsale:".
	Namespace string
	// BackoffMin and BackoffMax bound the fallback retry delay of a waiting
	// Acquire: it starts at BackoffMin and doubles, with jitter, up to
	// BackoffMax. Default 1 ms and TTL/8.
	BackoffMin, BackoffMax time.Duration
	// Watchdog makes every lease extend itself at a third of its TTL until
	// it is released, and report through Lease.Lost when it could not.
	// Lockers.SetWatchdog switches it later.
	Watchdog bool
	// FastOff switches the speed layer off: every variant runs exactly its
	// taught code, a waiter retries after a random delay, a release is the
	// variant's own, nothing listens for wake-ups and the app sets no
	// keyspace notifications. Redlock's votes travel on their pipelined
	// connections either way. Lockers.SetFast switches it later.
	FastOff bool
	// NotificationsOff stops waking waiters by keyspace notifications, and
	// the waiting line across processes: the speed layer's waiters fall back
	// to the jittered backoff. It matters only while the speed layer is on.
	NotificationsOff bool
	// RestartAwarenessOff stops Redlock ignoring a node that just restarted
	// (or just started) until every lease its previous incarnation can have
	// granted has run out, a bit more than the largest TTL any client of it
	// uses, and re-seeding a node's fencing counters from the other nodes
	// once per incarnation before it counts. Set it only to show the double
	// grant that restart awareness prevents.
	RestartAwarenessOff bool
	// Sentinel puts a Sentinel-managed master in front of the nodes given to
	// NewLockers: it is the first node (the single-node variants' only one,
	// and one Redlock vote), reached as whichever server its sentinels name
	// as master now. The nodes given may then be none. Default none.
	Sentinel *redis.FailoverOptions
	// Logger is where the lockers log. Default slog.Default().
	Logger *slog.Logger

	tap locktap.Tap // the application's fault plan and observer
}

// config is what every Locker of one Lockers set shares: the options
// settled, and the switches that change at run time.
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
	observer      func(locktap.Event)
	logger        *slog.Logger
	sentinel      *redis.FailoverOptions
}

// settle is the config o describes, every zero field at its default.
func (o Options) settle() (*config, error) {
	c := &config{
		ttl: o.TTL, nodeTimeout: o.NodeTimeout, namespace: o.Namespace,
		restartAware: !o.RestartAwarenessOff, notifications: !o.NotificationsOff,
		backoffMin: o.BackoffMin, backoffMax: o.BackoffMax,
		faults: o.tap.Faults, observer: o.tap.Observer, logger: o.Logger, sentinel: o.Sentinel,
	}
	c.watchdog.Store(o.Watchdog)
	c.fast.Store(!o.FastOff)
	if c.ttl < 0 {
		return nil, fmt.Errorf("lock: ttl must be positive, got %v", c.ttl)
	}
	if c.ttl == 0 {
		c.ttl = 2 * time.Second
	}
	if c.namespace == "" {
		c.namespace = "flashsale:"
	}
	if c.faults == nil {
		c.faults = fault.NewPlan()
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.nodeTimeout <= 0 {
		// Short against the TTL, as the Redlock description asks, but not so
		// short that a busy machine's scheduling counts as a dead node.
		c.nodeTimeout = min(max(c.ttl/20, 50*time.Millisecond), c.ttl/3)
	}
	if c.backoffMax <= 0 {
		c.backoffMax = c.ttl / 8
	}
	if c.backoffMin <= 0 || c.backoffMin > c.backoffMax {
		c.backoffMin = min(time.Millisecond, c.backoffMax)
	}
	return c, nil
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
