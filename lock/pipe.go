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
// checks the node's run_id before any command reaches that incarnation.
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

// send queues one command; done is called exactly once with its reply, from
// the reader goroutine (it must not block) or, if the node cannot be reached,
// from the goroutine that finds out.
func (p *pipe) send(args []string, done replyFunc) {
	p.current().send(args, done)
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
	sent time.Time
}

func (c *pipeConn) broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

func (c *pipeConn) send(args []string, done replyFunc) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		done(nil, err)
		return
	}
	c.out = appendCommand(c.out, args...)
	c.queue = append(c.queue, waiting{done: done, sent: time.Now()})
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
// handshake, before the reader goroutine owns the connection.
func exchange(ctx context.Context, nc net.Conn, r *bufio.Reader, cmds ...[]string) ([]any, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	var b []byte
	for _, cmd := range cmds {
		b = appendCommand(b, cmd...)
	}
	if _, err := nc.Write(b); err != nil {
		return nil, err
	}
	out := make([]any, len(cmds))
	for i := range cmds {
		v, err := readReply(r)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// handshake authenticates, selects the database, and notes the node's
// run_id (a restart shows as a new one) before any vote is sent.
func (n *node) handshake(ctx context.Context, nc net.Conn, r *bufio.Reader, o *redis.Options) error {
	var cmds [][]string
	if o.Password != "" {
		if o.Username != "" {
			cmds = append(cmds, []string{"AUTH", o.Username, o.Password})
		} else {
			cmds = append(cmds, []string{"AUTH", o.Password})
		}
	}
	if o.DB != 0 {
		cmds = append(cmds, []string{"SELECT", strconv.Itoa(o.DB)})
	}
	cmds = append(cmds, []string{"INFO", "server"})
	replies, err := exchange(ctx, nc, r, cmds...)
	if err != nil {
		return err
	}
	for _, v := range replies[:len(replies)-1] {
		if se, ok := v.(serverError); ok {
			return se
		}
	}
	// A server that refuses INFO (an ACL user without it) still takes
	// votes, only without restart awareness. A connection that breaks
	// during the CONFIG calls fails at the reader's first read.
	info, _ := replies[len(replies)-1].(string)
	n.meet(info, func() (string, error) {
		replies, err := exchange(ctx, nc, r, []string{"CONFIG", "GET", "notify-keyspace-events"})
		if err != nil {
			return "", err
		}
		kv, ok := replies[0].([]any)
		if !ok || len(kv) != 2 {
			return "", fmt.Errorf("CONFIG GET notify-keyspace-events: %v", replies[0])
		}
		cur, _ := kv[1].(string)
		return cur, nil
	}, func(want string) error {
		_, err := exchange(ctx, nc, r, []string{"CONFIG", "SET", "notify-keyspace-events", want})
		return err
	})
	return nil
}
