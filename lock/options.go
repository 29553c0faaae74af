package lock

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/node"
)

// Options configures a set of lockers. The zero value is a working
// configuration: every field left zero takes the default its comment gives.
type Options struct {
	// TTL is the lease time to live. Default 2s.
	TTL time.Duration
	// NodeTimeout bounds each Redlock call to one node. Default TTL/20,
	// between 50 ms and TTL/3.
	NodeTimeout time.Duration
	// Namespace prefixes every Redis key the locks use. Default "flashsale:".
	Namespace string
	// BackoffMin and BackoffMax bound Acquire's random delay between tries,
	// which doubles from the one to the other. Default 1 ms and TTL/8.
	BackoffMin, BackoffMax time.Duration
	// Watchdog makes every lease extend itself every TTL/3 until released,
	// and close Lease.Lost when it could not. Client.SetWatchdog switches it.
	Watchdog bool
	// FastOff switches the speed layer off: every variant runs exactly its
	// taught code. Client.SetFast switches it later.
	FastOff bool
	// NotificationsOff stops the speed layer's keyspace wake-ups and its
	// waiting line across processes; its waiters fall back to the backoff.
	NotificationsOff bool
	// RestartAwarenessOff stops Redlock sitting out a node that restarted
	// or lost data until every lease it can have granted has run out, and
	// re-seeding its fencing counters before it counts. Set it only to show
	// the double grant that restart awareness prevents.
	RestartAwarenessOff bool
	// Sentinel puts a Sentinel-managed master first, before the nodes given
	// to New (which may then be none): the single-node variants' node
	// and one Redlock vote. Default none.
	Sentinel *redis.FailoverOptions
	// Logger is where the lockers log. Default slog.Default().
	Logger *slog.Logger
	// Rungs are protocols to run beside the library's own (Lua, Redlock,
	// LuaFence, RedlockFence), each under its name. Default none.
	Rungs []Rung
	// Trace, if set, is told of every lease's life and may stall or end an
	// operation between two of its steps (fault injection). Default none.
	Trace *Trace
}

// config is what every Locker of one Client shares: the options
// settled, and the switches that change at run time.
type config struct {
	ttl           time.Duration
	nodeTimeout   time.Duration
	namespace     string
	watchdog      atomic.Bool // switched at run time (Client.SetWatchdog)
	fast          atomic.Bool // the speed layer, switched at run time (Client.SetFast)
	restartAware  bool
	notifications bool
	backoffMin    time.Duration
	backoffMax    time.Duration
	trace         Trace // the hooks set (Options.Trace), the others nil
	logger        *slog.Logger
	sentinel      *redis.FailoverOptions
}

// settle is the config o describes, every zero field at its default.
func (o Options) settle() (*config, error) {
	c := &config{
		ttl: o.TTL, nodeTimeout: o.NodeTimeout, namespace: o.Namespace,
		restartAware: !o.RestartAwarenessOff, notifications: !o.NotificationsOff,
		backoffMin: o.BackoffMin, backoffMax: o.BackoffMax,
		logger: o.Logger, sentinel: o.Sentinel,
	}
	if o.Trace != nil {
		c.trace = *o.Trace
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
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.nodeTimeout <= 0 {
		// Short against the TTL, but not so short that a busy machine's
		// scheduling counts as a dead node.
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

// lateWindow is how long a silent node still counts as up but late
// (node.LateWindow).
func (c *config) lateWindow() time.Duration { return node.LateWindow(c.nodeTimeout, c.ttl) }
