package lock

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/databirth"
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
	if infoField(info, "redis_mode") == "sentinel" {
		// A failover client runs the hook on its connections to the
		// sentinels too: they are not the node and have no incarnation.
		return nil
	}
	var age dataAge
	born, err := cn.Eval(ctx, dataBirth.src, []string{databirth.Key}).Int64Slice()
	if err := connectionError(err); err != nil {
		return err
	}
	if len(born) == 2 {
		age = dataAge{d: time.Duration(born[1]-born[0]) * time.Millisecond, known: true}
	}
	seeded, err := cn.Get(ctx, n.cfg.seededKey()).Result()
	if err := connectionError(err); err != nil {
		return err
	}
	// After the marker: a re-seed between the two reads then leaves a
	// record at least as large as the marker promises.
	recorded, err := cn.Eval(ctx, recordTTL.src, []string{n.cfg.ttlKey()}, n.cfg.ttl.Milliseconds()).Int64()
	if err := connectionError(err); err != nil {
		return err
	}
	return n.meet(info, age, seeded, time.Duration(recorded)*time.Millisecond, func() (string, error) {
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
	for _, row := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(row, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
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

// handshake authenticates, selects the database, and meets the node's
// incarnation (restart.go) before any vote is sent. Every error fails the
// connection: a handshake cut short by its deadline still owes replies, and
// a reader started on it would hand each vote the answer to the command
// before it. Only error replies to INFO and CONFIG are tolerated (an ACL
// user may not be allowed them): the node then still takes votes, without
// restart awareness or wake-ups. It returns the incarnation (run_id) and the
// data's birth it met (connTag), which every vote on the connection carries.
func (n *node) handshake(ctx context.Context, nc net.Conn, r *bufio.Reader, o *redis.Options) (string, error) {
	var cmds []wire.Command
	if o.Password != "" {
		auth := []string{"AUTH", o.Password}
		if o.Username != "" {
			auth = []string{"AUTH", o.Username, o.Password}
		}
		cmds = append(cmds, wire.Command{Args: auth, Want: wire.Bulk})
	}
	if o.DB != 0 {
		cmds = append(cmds, wire.Command{Args: []string{"SELECT", strconv.Itoa(o.DB)}, Want: wire.Bulk})
	}
	// The TTL record after the seeded marker, as onConnect reads them.
	cmds = append(cmds, wire.Command{Args: []string{"INFO", "server"}, Want: wire.Bulk},
		wire.Command{Args: dataBirth.eval([]string{databirth.Key}), Want: wire.Array},
		wire.Command{Args: []string{"GET", n.cfg.seededKey()}, Want: wire.BulkOrNil},
		wire.Command{Args: recordTTL.eval([]string{n.cfg.ttlKey()}, strconv.FormatInt(n.cfg.ttl.Milliseconds(), 10)), Want: wire.Integer})
	replies, err := wire.Exchange(ctx, nc, r, cmds...)
	if err != nil {
		return "", err
	}
	for _, v := range replies[:len(replies)-4] {
		if se, ok := v.(wire.ServerError); ok {
			return "", se
		}
	}
	info, _ := replies[len(replies)-4].(string)
	var age dataAge
	var b int64
	if born, _ := replies[len(replies)-3].([]any); len(born) == 2 {
		b, _ = born[0].(int64)
		now, _ := born[1].(int64)
		age = dataAge{d: time.Duration(now-b) * time.Millisecond, known: true}
	}
	seeded, _ := replies[len(replies)-2].(string)
	recorded, _ := replies[len(replies)-1].(int64)
	err = n.meet(info, age, seeded, time.Duration(recorded)*time.Millisecond, func() (string, error) {
		replies, err := wire.Exchange(ctx, nc, r, wire.Command{Args: []string{"CONFIG", "GET", "notify-keyspace-events"}, Want: wire.Array})
		if err != nil {
			return "", err
		}
		kv, _ := replies[0].([]any)
		if len(kv) != 2 {
			return "", wire.ServerError(fmt.Sprintf("CONFIG GET notify-keyspace-events: %v", replies[0]))
		}
		cur, _ := kv[1].(string)
		return cur, nil
	}, func(want string) error {
		replies, err := wire.Exchange(ctx, nc, r, wire.Command{Args: []string{"CONFIG", "SET", "notify-keyspace-events", want}, Want: wire.Bulk})
		if err != nil {
			return err
		}
		if se, ok := replies[0].(wire.ServerError); ok {
			return se
		}
		return nil
	})
	return connTag(infoField(info, "run_id"), b, age.known), err
}

// one is 1 for true, 0 for false.
func one(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
