package lock

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipe is the one connection a node's Redlock votes travel on. A caller
// appends its command to the connection's write buffer and goes on to the
// next node; whoever finds no write in progress writes the buffer, carrying
// the commands that other callers appended meanwhile with its own, and a
// reader goroutine hands the replies back in order. So:
//
//   - a vote costs one write per node and no goroutine per node: asking five
//     nodes is five writes, then one wait;
//   - concurrent lockers share writes and reads (pipelining), which is where
//     Redlock's throughput over many keys comes from;
//   - one client's commands reach a node in the order it sent them, so the
//     release that undoes an acquire can never overtake it, even on a node
//     that was paused with both in its socket buffer.
//
// A connection is opened on first use and again after it broke; opening it
// meets the node's incarnation (its uptime, restart.go) before any command
// reaches it.
type pipe struct {
	n    *node
	opts *redis.Options

	mu     sync.Mutex
	conn   *pipeConn
	closed bool
}

// errPipeClosed answers the commands still queued when the lockers close.
var errPipeClosed = errors.New("lock: node connection closed")

func newPipe(n *node, opts *redis.Options) *pipe { return &pipe{n: n, opts: opts} }

// replyFunc receives what a node answered to one command: v is int64,
// string, nil, []any or serverError; err is set when no answer came (the
// connection broke or could not be opened).
type replyFunc func(v any, err error)

// send queues one command whose replies have the shape want; done is called
// exactly once with its reply, from the reader goroutine (it must not block)
// or, if the node cannot be reached, from the goroutine that finds out. A
// reply that does not fit want breaks the connection: every command waiting
// on it gets an error, none gets a reply that was meant for another.
func (p *pipe) send(args []string, want shape, done replyFunc) {
	p.current().send(args, want, done)
}

func (p *pipe) current() *pipeConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil || p.conn.broken() {
		p.conn = &pipeConn{p: p}
		if p.closed {
			p.conn.err = errPipeClosed
		} else {
			go p.conn.open()
		}
	}
	return p.conn
}

// stale drops the connection if its oldest unanswered command has waited
// longer than limit: a node that stopped answering without closing the
// connection (paused, or cut off without a reset) would otherwise collect
// commands forever.
func (p *pipe) stale(limit time.Duration) {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.dropIfStale(limit)
	}
}

func (p *pipe) close() {
	p.mu.Lock()
	p.closed = true
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.fail(errPipeClosed)
	}
}

// pipeConn is one connection of a pipe, from dialling to broken.
type pipeConn struct {
	p *pipe

	mu      sync.Mutex
	nc      net.Conn
	ready   bool   // opened and checked: out may be written
	writing bool   // a caller is writing out; others only append
	out     []byte // commands not yet written
	spare   []byte // the buffer last written, reused for the next batch
	queue   []waiting
	head    int   // queue[head:] wait for replies, oldest first
	err     error // set once: the connection is finished
}

type waiting struct {
	done replyFunc
	want shape
	sent time.Time
}

func (c *pipeConn) broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

func (c *pipeConn) send(args []string, want shape, done replyFunc) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		done(nil, err)
		return
	}
	c.out = appendCommand(c.out, args...)
	c.queue = append(c.queue, waiting{done: done, want: want, sent: time.Now()})
	c.flush()
}

// flush writes out until it is empty, unless another caller is already
// writing or the connection is not open yet. Called with mu held; returns
// with it released.
func (c *pipeConn) flush() {
	if !c.ready || c.writing || c.err != nil {
		c.mu.Unlock()
		return
	}
	c.writing = true
	for len(c.out) > 0 && c.err == nil {
		batch := c.out
		c.out = c.spare[:0]
		c.mu.Unlock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.p.n.cfg.nodeTimeout + time.Second))
		_, err := c.nc.Write(batch)
		c.mu.Lock()
		c.spare = batch[:0]
		if err != nil {
			c.mu.Unlock()
			c.fail(fmt.Errorf("node %s: write: %w", c.p.n.addr, err))
			c.mu.Lock()
		}
	}
	c.writing = false
	c.mu.Unlock()
}

// fail finishes the connection: every command still waiting gets err.
func (c *pipeConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	queued := c.queue[c.head:]
	c.queue, c.head, c.out = nil, 0, nil
	nc := c.nc
	c.mu.Unlock()
	if nc != nil {
		_ = nc.Close()
	}
	for _, w := range queued {
		w.done(nil, err)
	}
}

func (c *pipeConn) dropIfStale(limit time.Duration) {
	c.mu.Lock()
	stale := c.head < len(c.queue) && time.Since(c.queue[c.head].sent) > limit
	c.mu.Unlock()
	if stale {
		c.fail(fmt.Errorf("node %s: no answer for %v: %w", c.p.n.addr, limit, context.DeadlineExceeded))
	}
}

// open dials, checks the node's incarnation, and then writes whatever was
// queued meanwhile.
func (c *pipeConn) open() {
	o := c.p.opts
	ctx, cancel := context.WithTimeout(context.Background(), o.DialTimeout)
	defer cancel()
	nc, err := dialNode(ctx, o)
	if err != nil {
		c.fail(fmt.Errorf("node %s: %w", c.p.n.addr, err))
		return
	}
	c.mu.Lock()
	if c.err != nil { // closed while dialling
		c.mu.Unlock()
		_ = nc.Close()
		return
	}
	c.nc = nc
	c.mu.Unlock()
	r := bufio.NewReaderSize(nc, 16<<10)
	if err := c.p.n.handshake(ctx, nc, r, o); err != nil {
		c.fail(fmt.Errorf("node %s: %w", c.p.n.addr, err))
		return
	}
	_ = nc.SetDeadline(time.Time{})
	go c.read(r)
	c.mu.Lock()
	c.ready = true
	c.flush()
}

// read hands every reply to the oldest waiting command, until the
// connection breaks.
func (c *pipeConn) read(r *bufio.Reader) {
	for {
		v, err := readReply(r)
		if err != nil {
			c.fail(fmt.Errorf("node %s: %w", c.p.n.addr, err))
			return
		}
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return
		}
		if c.head == len(c.queue) {
			c.mu.Unlock()
			c.fail(fmt.Errorf("node %s: %w: reply to no command", c.p.n.addr, errProtocol))
			return
		}
		w := c.queue[c.head]
		if !fits(w.want, v) {
			c.mu.Unlock()
			c.fail(fmt.Errorf("node %s: %w: a reply %#v that does not fit its command", c.p.n.addr, errProtocol, v))
			return
		}
		c.queue[c.head] = waiting{}
		c.head++
		// Under steady load the queue may never run empty: move what is
		// left to the front once the answered part is the larger half, so
		// the array does not grow for ever.
		if c.head == len(c.queue) || c.head > 64 && 2*c.head > len(c.queue) {
			n := copy(c.queue, c.queue[c.head:])
			c.queue, c.head = c.queue[:n], 0
		}
		c.mu.Unlock()
		w.done(v, nil)
	}
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

// exchange writes cmds at once and reads one reply per command, for the
// handshake, before the reader goroutine owns the connection. Any error —
// the deadline included — leaves replies owed on the connection, so the
// caller must close it; a reply that does not fit its command is an error.
func exchange(ctx context.Context, nc net.Conn, r *bufio.Reader, cmds ...command) ([]any, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	var b []byte
	for _, cmd := range cmds {
		b = appendCommand(b, cmd.args...)
	}
	if _, err := nc.Write(b); err != nil {
		return nil, err
	}
	out := make([]any, len(cmds))
	for i, cmd := range cmds {
		v, err := readReply(r)
		if err != nil {
			return nil, err
		}
		if !fits(cmd.want, v) {
			return nil, fmt.Errorf("%w: %s answered %#v", errProtocol, cmd.args[0], v)
		}
		out[i] = v
	}
	return out, nil
}

// command is one handshake command and the shape of its reply.
type command struct {
	args []string
	want shape
}

// handshake authenticates, selects the database, and meets the node's
// incarnation (restart.go) before any vote is sent. Every error fails the
// connection: a handshake cut short by its deadline still owes replies, and
// a reader started on it would hand each vote the answer to the command
// before it. Only error replies to INFO and CONFIG are tolerated (an ACL
// user may not be allowed them): the node then still takes votes, without
// restart awareness or wake-ups.
func (n *node) handshake(ctx context.Context, nc net.Conn, r *bufio.Reader, o *redis.Options) error {
	var cmds []command
	if o.Password != "" {
		auth := []string{"AUTH", o.Password}
		if o.Username != "" {
			auth = []string{"AUTH", o.Username, o.Password}
		}
		cmds = append(cmds, command{auth, bulk})
	}
	if o.DB != 0 {
		cmds = append(cmds, command{[]string{"SELECT", strconv.Itoa(o.DB)}, bulk})
	}
	cmds = append(cmds, command{[]string{"INFO", "server"}, bulk}, command{[]string{"GET", n.cfg.seededKey()}, bulkOrNil})
	replies, err := exchange(ctx, nc, r, cmds...)
	if err != nil {
		return err
	}
	for _, v := range replies[:len(replies)-2] {
		if se, ok := v.(serverError); ok {
			return se
		}
	}
	info, _ := replies[len(replies)-2].(string)
	seeded, _ := replies[len(replies)-1].(string)
	return n.meet(info, seeded, func() (string, error) {
		replies, err := exchange(ctx, nc, r, command{[]string{"CONFIG", "GET", "notify-keyspace-events"}, array})
		if err != nil {
			return "", err
		}
		kv, _ := replies[0].([]any)
		if len(kv) != 2 {
			return "", serverError(fmt.Sprintf("CONFIG GET notify-keyspace-events: %v", replies[0]))
		}
		cur, _ := kv[1].(string)
		return cur, nil
	}, func(want string) error {
		replies, err := exchange(ctx, nc, r, command{[]string{"CONFIG", "SET", "notify-keyspace-events", want}, bulk})
		if err != nil {
			return err
		}
		if se, ok := replies[0].(serverError); ok {
			return se
		}
		return nil
	})
}
