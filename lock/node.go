package lock

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/wire"
)

// node is one independent Redis master and what this process knows about its
// incarnation (restart.go).
type node struct {
	addr  string
	rdb   *redis.Client // scans, pub/sub, re-seeding and the single-node variants
	pipe  *wire.Pipe    // the Redlock votes
	cfg   *config
	ctx   context.Context // done when the lockers close
	peers []*node         // every node of the set, this one included

	inc incarnation
}

func newNode(ctx context.Context, o *redis.Options, cfg *config) *node {
	cp := *o // our own copy: we set OnConnect on it
	o = &cp
	tune(o)
	n := &node{addr: o.Addr, cfg: cfg, ctx: ctx}
	o.OnConnect = n.chainOnConnect(o.OnConnect)
	n.rdb = redis.NewClient(o)
	n.openPipe()
	return n
}

// newFailoverNode is a node that is whichever server the sentinels of fo
// name as master now: every new connection, the votes' included, asks them
// first (go-redis's failover client dials that way).
func newFailoverNode(ctx context.Context, fo *redis.FailoverOptions, cfg *config) *node {
	cp := *fo
	fo = &cp
	t := &redis.Options{Protocol: fo.Protocol, MaxRetries: fo.MaxRetries, DialerRetries: fo.DialerRetries}
	tune(t)
	fo.ContextTimeoutEnabled, fo.Protocol, fo.MaxRetries = t.ContextTimeoutEnabled, t.Protocol, t.MaxRetries
	fo.DialerRetries, fo.DisableIdentity = t.DialerRetries, t.DisableIdentity
	n := &node{addr: "sentinel:" + fo.MasterName, cfg: cfg, ctx: ctx}
	fo.OnConnect = n.chainOnConnect(fo.OnConnect)
	n.rdb = redis.NewFailoverClient(fo)
	n.openPipe()
	return n
}

// tune sets what the lock needs of a node's client.
func tune(o *redis.Options) {
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
}

// chainOnConnect runs onConnect, then the caller's own hook if any.
func (n *node) chainOnConnect(prev func(context.Context, *redis.Conn) error) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		if err := n.onConnect(ctx, cn); err != nil {
			return err
		}
		if prev != nil {
			return prev(ctx, cn)
		}
		return nil
	}
}

// openPipe sets up the votes' connection; it dials the way n.rdb does (a
// failover client's options carry its sentinel-asking dialer).
func (n *node) openPipe() {
	o := n.rdb.Options() // with go-redis's defaults filled in
	n.pipe = wire.NewPipe(wire.Config{
		Addr:         n.addr,
		Dial:         func(ctx context.Context) (net.Conn, error) { return dialNode(ctx, o) },
		DialTimeout:  o.DialTimeout,
		WriteTimeout: n.cfg.nodeTimeout + time.Second,
		Handshake: func(ctx context.Context, nc net.Conn, r *bufio.Reader) (string, error) {
			return n.handshake(ctx, nc, r, o)
		},
	})
}

// onConnect meets the node on a new go-redis connection (pub/sub, scans,
// re-seeding, the single-node variants), as the pipe's handshake does for
// the votes.
func (n *node) onConnect(ctx context.Context, cn *redis.Conn) error {
	_, err := n.greet(ctx, poolExchange(cn))
	return err
}

// dialNode opens a connection the way go-redis would for these options:
// its dialer if set, else TCP, with TLS for rediss://.
func dialNode(ctx context.Context, o *redis.Options) (net.Conn, error) {
	if o.Dialer != nil {
		return o.Dialer(ctx, o.Network, o.Addr)
	}
	d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 15 * time.Second}
	if o.TLSConfig != nil {
		return (&tls.Dialer{NetDialer: d, Config: o.TLSConfig}).DialContext(ctx, o.Network, o.Addr)
	}
	return d.DialContext(ctx, o.Network, o.Addr)
}

// handshake authenticates, selects the database, and meets the node
// (meeting.go) before any vote is sent. Every error fails the connection: a
// handshake cut short by its deadline still owes replies, and a reader
// started on it would hand each vote the answer to the command before it.
func (n *node) handshake(ctx context.Context, nc net.Conn, r *bufio.Reader, o *redis.Options) (string, error) {
	return n.greet(ctx, pipeExchange(nc, r, o))
}

// one is 1 for true, 0 for false.
func one(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
