package lock

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// node is one independent Redis master and what this process knows about its
// incarnation (restart.go).
type node struct {
	addr  string
	rdb   *redis.Client // scans, pub/sub, re-seeding and the single-node variants
	pipe  *pipe         // the Redlock votes
	cfg   *config
	ctx   context.Context // done when the lockers close
	peers []*node         // every node of the set, this one included

	inc incarnation
}

func newNode(ctx context.Context, o *redis.Options, cfg *config) *node {
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
	n := &node{addr: o.Addr, cfg: cfg, ctx: ctx}
	prev := o.OnConnect
	o.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		if err := n.onConnect(ctx, cn); err != nil {
			return err
		}
		if prev != nil {
			return prev(ctx, cn)
		}
		return nil
	}
	n.rdb = redis.NewClient(o)
	n.pipe = newPipe(n, n.rdb.Options()) // with go-redis's defaults filled in
	return n
}

// onConnect meets the node's incarnation on a new go-redis connection
// (pub/sub, scans, single-node variants), as the pipe's handshake does for
// the votes. An error reply (an ACL user without INFO or CONFIG) leaves the
// connection usable; any other error fails it, so no reply owed to an
// unfinished command is read as the answer to the next one.
func (n *node) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "server").Result()
	if err := connectionError(err); err != nil {
		return err
	}
	seeded, err := cn.Get(ctx, n.cfg.seededKey()).Result()
	if err := connectionError(err); err != nil {
		return err
	}
	return n.meet(info, seeded, func() (string, error) {
		cur, err := cn.ConfigGet(ctx, "notify-keyspace-events").Result()
		return cur["notify-keyspace-events"], err
	}, func(want string) error {
		return cn.ConfigSet(ctx, "notify-keyspace-events", want).Err()
	})
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
