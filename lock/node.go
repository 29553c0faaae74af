package lock

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is one independent Redis master and what this process knows about its
// incarnation. Every command after a restart travels on a new connection, so
// checking the run_id when a connection opens sees every restart before any
// command reaches the new incarnation.
type node struct {
	addr string
	rdb  *redis.Client // scans, pub/sub and the single-node variants
	pipe *pipe         // the Redlock votes
	cfg  *config

	mu       sync.Mutex
	runID    string
	back     time.Time // restarted: does not count toward a quorum before this
	reseed   bool      // restarted: fencing counters must be re-seeded first
	notified bool      // keyspace notifications checked on this incarnation

	reseedMu sync.Mutex // one re-seed at a time
}

func newNode(o *redis.Options, cfg *config) *node {
	cp := *o // our own copy: we set OnConnect on it
	o = &cp
	// A Redlock vote is bounded by its per-node timeout only if the client
	// honours context deadlines on the wire, not just between commands.
	o.ContextTimeoutEnabled = true
	// RESP2: RESP3 makes the client peek for push messages before every
	// reply, a second read syscall per command that a lock does not need.
	if o.Protocol == 0 {
		o.Protocol = 2
	}
	// The lock has its own retry policy; a node that refuses the connection
	// must show up as down at once, not after the client's own retries.
	if o.MaxRetries == 0 {
		o.MaxRetries = -1
	}
	if o.DialerRetries <= 0 {
		o.DialerRetries = 1
	}
	// CLIENT SETINFO on every new connection is two more round trips that
	// would count against a vote's per-node timeout.
	o.DisableIdentity = true
	n := &node{addr: o.Addr, cfg: cfg}
	prev := o.OnConnect
	o.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		n.onConnect(ctx, cn)
		if prev != nil {
			return prev(ctx, cn)
		}
		return nil
	}
	n.rdb = redis.NewClient(o)
	n.pipe = newPipe(n, n.rdb.Options()) // with go-redis's defaults filled in
	return n
}

// onConnect notices a changed run_id and turns keyspace notifications on,
// for the go-redis connections (pub/sub, scans, single-node variants).
// Errors are ignored: a server without INFO or CONFIG (or an ACL user not
// allowed them) still works, only without restart awareness or wake-ups.
func (n *node) onConnect(ctx context.Context, cn *redis.Conn) {
	info, err := cn.Info(ctx, "server").Result()
	if err != nil {
		return
	}
	n.meet(info, func() (string, error) {
		cur, err := cn.ConfigGet(ctx, "notify-keyspace-events").Result()
		return cur["notify-keyspace-events"], err
	}, func(want string) error {
		return cn.ConfigSet(ctx, "notify-keyspace-events", want).Err()
	})
}

// meet records the incarnation a new connection's INFO showed and, the
// first time this process meets an incarnation, adds the keyspace events the
// waiters need to what the node publishes, through get and set on that
// connection. Their errors are ignored, as in onConnect.
func (n *node) meet(info string, get func() (string, error), set func(flags string) error) {
	if !n.incarnation(infoField(info, "run_id")) {
		return
	}
	if cur, err := get(); err == nil {
		if want := notifyFlags(cur); want != cur {
			_ = set(want)
		}
	}
}

// incarnation records the run_id a new connection found. A changed one is a
// restart: the node sits out a TTL and its fencing counters need re-seeding.
// It reports whether this incarnation still needs keyspace notifications
// turned on.
func (n *node) incarnation(id string) (notify bool) {
	n.mu.Lock()
	restarted := n.runID != "" && id != "" && id != n.runID
	if restarted {
		n.back = time.Now().Add(n.cfg.ttl)
		n.reseed = true
		n.notified = false
	}
	if id != "" {
		n.runID = id
	}
	notify = n.cfg.notifications && !n.notified
	n.notified = true
	n.mu.Unlock()
	if restarted {
		n.cfg.logger.Warn("redis node restarted: not counted toward a quorum until the TTL has passed",
			"node", n.addr, "run_id", id, "restart_aware", n.cfg.restartAware, "back_at", time.Now().Add(n.cfg.ttl))
	}
	return notify
}

// notifyFlags adds the keyspace events for deletes and expiries (K, g, x) to
// whatever the server already publishes.
func notifyFlags(flags string) string {
	want := flags
	for _, f := range []string{"K", "g", "x"} {
		if !strings.Contains(want, f) && !(f != "K" && strings.Contains(want, "A")) {
			want += f
		}
	}
	return want
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// state says whether the node may count toward a quorum now, and whether its
// fencing counters need re-seeding before it does.
func (n *node) state(now time.Time) (counts, reseed bool) {
	if !n.cfg.restartAware {
		return true, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if now.Before(n.back) {
		return false, false
	}
	return !n.reseed, n.reseed
}
