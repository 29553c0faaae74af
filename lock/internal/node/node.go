// Package node is one Redis master as the lock reaches it: a go-redis client
// and the votes' pipelined connection, both of which meet the node on every
// new connection so that what this process knows of the node's
// incarnation (restart awareness) decides whether its votes count.
package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/wire"
)

// Config is what every node of one set shares. It is read, never changed,
// once the nodes are made.
type Config struct {
	TTL          time.Duration // this client's lease TTL
	Timeout      time.Duration // the per-node timeout of a vote
	Namespace    string        // the prefix of the keys the nodes hold for the lock
	RestartAware bool          // votes count only while the node's incarnation may vote
	// SitOut is how long a node whose data lost keys stays out, for a
	// largest TTL in use of ttl. Nil: the TTL itself.
	SitOut func(ttl time.Duration) time.Duration
	Logger *slog.Logger // nil: slog.Default()
}

// withDefaults is a copy of c with every nil filled in.
func (c *Config) withDefaults() *Config {
	cp := *c
	if cp.SitOut == nil {
		cp.SitOut = func(ttl time.Duration) time.Duration { return ttl }
	}
	if cp.Logger == nil {
		cp.Logger = slog.Default()
	}
	return &cp
}

// Node is one independent Redis master and what this process knows about
// its incarnation.
type Node struct {
	addr  string
	rdb   *redis.Client // scans, pub/sub, re-seeding and the single-node variants
	lib   *redis.Client // a library's own Redlock (Library)
	pipe  *wire.Pipe    // the Redlock votes
	cfg   *Config
	ctx   context.Context // done when the node's owner closes the set
	peers []*Node         // every node of the set, this one included

	inc incarnation
}

// New is the node o names. Nothing is dialed yet: Open does, or the first
// use. ctx ends the node's background re-seeds.
func New(ctx context.Context, o *redis.Options, cfg *Config) *Node {
	cp, lib := *o, *o // our own copies: we set OnConnect on one
	o = &cp
	tune(o)
	n := newNode(ctx, o.Addr, cfg)
	o.OnConnect = n.withMeeting(o.OnConnect)
	n.rdb = redis.NewClient(o)
	n.lib = redis.NewClient(&lib)
	n.openPipe()
	return n
}

// NewFailover is a node that is whichever server the sentinels of fo name
// as master now: every new connection, the votes' included, asks them
// first (go-redis's failover client dials that way).
func NewFailover(ctx context.Context, fo *redis.FailoverOptions, cfg *Config) *Node {
	cp, lib := *fo, *fo
	fo = &cp
	t := &redis.Options{Protocol: fo.Protocol, MaxRetries: fo.MaxRetries, DialerRetries: fo.DialerRetries}
	tune(t)
	fo.ContextTimeoutEnabled, fo.Protocol, fo.MaxRetries = t.ContextTimeoutEnabled, t.Protocol, t.MaxRetries
	fo.DialerRetries, fo.DisableIdentity = t.DialerRetries, t.DisableIdentity
	n := newNode(ctx, "sentinel:"+fo.MasterName, cfg)
	fo.OnConnect = n.withMeeting(fo.OnConnect)
	n.rdb = redis.NewFailoverClient(fo)
	n.lib = redis.NewFailoverClient(&lib)
	n.openPipe()
	return n
}

func newNode(ctx context.Context, addr string, cfg *Config) *Node {
	n := &Node{addr: addr, cfg: cfg.withDefaults(), ctx: ctx}
	n.inc.sitOut = n.cfg.SitOut
	return n
}

// Quorum is how many of n nodes make a majority: n/2+1. Redlock grants
// with this many yes votes; a node re-seeding its fencing counters needs
// answers from enough of the others that they include a quorum's worth.
func Quorum(n int) int { return n/2 + 1 }

// Join makes nodes one set: a node's counters are re-seeded from the
// others.
func Join(nodes []*Node) {
	for _, n := range nodes {
		n.peers = nodes
	}
}

// Addr is the node's address, or "sentinel:<master name>".
func (n *Node) Addr() string { return n.addr }

// Client is the node's go-redis client: scans, pub/sub, re-seeding and the
// single-node variants.
func (n *Node) Client() *redis.Client { return n.rdb }

// Plain is a client to the same server, configured as the caller gave
// it: none of the lock's tuning and no restart awareness's meeting on its
// connections. It is for a library that brings its own Redlock (the redsync
// rung), which must meet the node as its own users would. Its connections
// are dialed only when used.
func (n *Node) Plain() *redis.Client { return n.lib }

// Pipe is the votes' pipelined connection.
func (n *Node) Pipe() *wire.Pipe { return n.pipe }

// Silent reports a node that has owed an answer on the votes' connection
// for a per-node timeout and sent nothing: frozen, or cut off.
func (n *Node) Silent() bool { return n.pipe.Silent(n.cfg.Timeout) }

// Answering reports whether the node counts as up since then though an
// answer is not read yet: bytes arrived on the votes' connection since,
// or wait unread, or nothing written to it is owed.
func (n *Node) Answering(since time.Time) bool { return n.pipe.Answering(since) }

// DropIfSilent drops the votes' connection if nothing has arrived on it for d,
// so that commands do not queue behind a dead connection for ever.
func (n *Node) DropIfSilent(d time.Duration) { n.pipe.DropIfSilent(d) }

// Unreachable is why the votes' last connection could not be opened, or
// nil.
func (n *Node) Unreachable() error { return n.pipe.Unreachable() }

// Open opens a connection of each kind now, in the background: the first
// connection meets the node, and a vote should not pay for it.
func (n *Node) Open() {
	n.pipe.Open()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = n.rdb.Ping(ctx).Err()
	}()
}

// Close closes the client and the votes' connection.
func (n *Node) Close() error {
	n.pipe.Close()
	return errors.Join(n.rdb.Close(), n.lib.Close())
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

// withMeeting runs meetPool, then the caller's own hook if any.
func (n *Node) withMeeting(prev func(context.Context, *redis.Conn) error) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		if err := n.meetPool(ctx, cn); err != nil {
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
func (n *Node) openPipe() {
	o := n.rdb.Options() // with go-redis's defaults filled in
	n.pipe = wire.NewPipe(wire.Config{
		Addr:         n.addr,
		Dial:         func(ctx context.Context) (net.Conn, error) { return dial(ctx, o) },
		DialTimeout:  o.DialTimeout,
		WriteTimeout: n.cfg.Timeout + time.Second,
		Handshake: func(ctx context.Context, nc net.Conn, r *bufio.Reader) (string, error) {
			return n.meetPipe(ctx, nc, r, o)
		},
	})
}

// meetPool meets the node on a new go-redis connection (pub/sub, scans,
// re-seeding, the single-node variants), as meetPipe does for
// the votes.
func (n *Node) meetPool(ctx context.Context, cn *redis.Conn) error {
	_, err := n.meet(ctx, poolExchange(cn), false)
	return err
}

// dial opens a connection the way go-redis would for these options: its
// dialer if set, else TCP, with TLS for rediss://.
func dial(ctx context.Context, o *redis.Options) (net.Conn, error) {
	if o.Dialer != nil {
		return o.Dialer(ctx, o.Network, o.Addr)
	}
	d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 15 * time.Second}
	if o.TLSConfig != nil {
		return (&tls.Dialer{NetDialer: d, Config: o.TLSConfig}).DialContext(ctx, o.Network, o.Addr)
	}
	return d.DialContext(ctx, o.Network, o.Addr)
}

// meetPipe authenticates, selects the database, and meets the node
// before any vote is sent. Every error fails the connection: a
// meeting cut short by its deadline still owes replies, and a reader
// started on it would hand each vote the answer to the command before it.
func (n *Node) meetPipe(ctx context.Context, nc net.Conn, r *bufio.Reader, o *redis.Options) (string, error) {
	return n.meet(ctx, pipeExchange(nc, r, o), true)
}

// ForEach runs fn on every node in parallel, each under its own timeout
// (none when timeout is 0), and returns each node's error, in node order,
// wrapped with the node's address.
func ForEach(ctx context.Context, nodes []*Node, timeout time.Duration, fn func(context.Context, *Node) error) []error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			ctx := ctx
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			if err := fn(ctx, n); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", n.addr, err)
			}
		})
	}
	wg.Wait()
	return errs
}
