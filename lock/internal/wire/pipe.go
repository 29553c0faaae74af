// Package wire is the Redis connection the Redlock votes travel on: just
// enough of the RESP2 protocol for SET, EVAL, INFO, GET and CONFIG, and a
// pipelined connection per node that hands every reply to the command it
// belongs to — or breaks, failing every waiting command, when a reply does
// not fit.
package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Pipe is the one connection a node's Redlock votes travel on. A caller
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
// runs the handshake (for Redlock: meeting the node's incarnation) before any
// command reaches it.
type Pipe struct {
	cfg Config

	mu          sync.Mutex
	conn        *pipeConn
	closed      bool
	unreachable error // why the last connection could not be opened; nil once one opens
}

// Config is how a Pipe reaches its node.
type Config struct {
	Addr         string                                      // for error messages
	Dial         func(ctx context.Context) (net.Conn, error) // opens a connection
	DialTimeout  time.Duration                               // bounds Dial and Handshake together
	WriteTimeout time.Duration                               // bounds each write
	// Handshake runs on every new connection before any command is sent;
	// an error fails the connection. It must read every reply it asked for.
	// What it returns tags every reply the connection carries (for Redlock:
	// the node's incarnation that the handshake met).
	Handshake func(ctx context.Context, nc net.Conn, r *bufio.Reader) (tag string, err error)
}

// ErrClosed answers the commands still queued when the pipe is closed.
var ErrClosed = errors.New("redis node connection closed")

// NewPipe returns a pipe that opens its first connection when first used.
func NewPipe(cfg Config) *Pipe { return &Pipe{cfg: cfg} }

// ReplyFunc receives what a node answered to one command: v is int64,
// string, nil, []any or serverError, and tag the handshake's tag of the
// connection that carried it; err is set when no answer came (the
// connection broke or could not be opened).
type ReplyFunc func(v any, tag string, err error)

// Send queues one command whose replies have the Shape want; done is called
// exactly once with its reply, from the reader goroutine (it must not block)
// or, if the node cannot be reached, from the goroutine that finds out. A
// reply that does not fit want breaks the connection: every command waiting
// on it gets an error, none gets a reply that was meant for another.
func (p *Pipe) Send(args []string, want Shape, done ReplyFunc) {
	p.current().send([]Command{{Args: args, Want: want}}, []ReplyFunc{done})
}

// Open starts opening a connection now, if none is open, so that the first
// command does not wait for the dial and the handshake.
func (p *Pipe) Open() { p.current() }

func (p *Pipe) current() *pipeConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil || p.conn.broken() {
		trying := time.Now()
		if p.conn != nil && !p.conn.worked() {
			trying = p.conn.trying // still no connection that works
		}
		p.conn = &pipeConn{p: p, trying: trying}
		if p.closed {
			p.conn.err = ErrClosed
		} else {
			go p.conn.open()
		}
	}
	return p.conn
}

// DropIfSilent drops the connection if its oldest unanswered command was written
// longer than limit ago: a node that stopped answering without closing the
// connection (paused, or cut off without a reset) would otherwise collect
// commands forever.
func (p *Pipe) DropIfSilent(limit time.Duration) {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.dropIfStale(limit)
	}
}

// Close fails every queued command with ErrClosed; later ones fail at once.
func (p *Pipe) Close() {
	p.mu.Lock()
	p.closed = true
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.fail(ErrClosed)
	}
}

// pipeConn is one connection of a pipe, from dialling to broken.
type pipeConn struct {
	p *Pipe
	// trying is since when the pipe has had no connection that worked:
	// when this one began opening, or earlier if the one before it never
	// opened or was dropped for silence (Silent).
	trying time.Time

	mu        sync.Mutex
	nc        net.Conn
	ready     bool   // opened and checked: out may be written
	writing   bool   // a caller is writing out; others only append
	out       []byte // commands not yet written
	unwritten int    // how many commands out holds: the last ones of queue
	spare     []byte // the buffer last written, reused for the next batch
	queue     []waiting
	head      int   // queue[head:] wait for replies, oldest first
	err       error // set once: the connection is finished
	stale     bool  // dropped for owing a reply too long
	tag       string
	// checked: the last commands of out are a shared check (SendChecked),
	// its bytes from checkAt on; nil once anything else follows it.
	checked *sharedCheck
	checkAt int

	// What arrived, for Answering: bytes read off the socket, bytes the
	// reader has parsed into replies, and when bytes last arrived (unix ns).
	received, parsed, arrived atomic.Int64
}

type waiting struct {
	done ReplyFunc
	want Shape
	sent time.Time // when its bytes were written; zero before
}

// sentBy reports whether the command was written by t. A command still
// waiting to be written is not owed a reply by the node: a process too busy
// to write it yet is slow here, not down there.
func (w waiting) sentBy(t time.Time) bool { return !w.sent.IsZero() && !w.sent.After(t) }

func (c *pipeConn) broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// worked reports whether the connection opened and was not dropped for
// silence: one that broke otherwise (a reset, the node restarting) may be
// replaced by one that works at once.
func (c *pipeConn) worked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready && !c.stale
}

// send queues cmds back to back; their replies go to dones, in order.
func (c *pipeConn) send(cmds []Command, dones []ReplyFunc) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		for _, done := range dones {
			done(nil, "", err)
		}
		return
	}
	c.appendCmds(cmds, dones)
	c.checked = nil
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
		batch, n := c.out, c.unwritten // the last n commands queued
		c.out, c.unwritten, c.checked = c.spare[:0], 0, nil
		c.mu.Unlock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.p.cfg.WriteTimeout))
		_, err := c.nc.Write(batch)
		c.mu.Lock()
		c.spare = batch[:0]
		if err != nil {
			c.mu.Unlock()
			c.fail(fmt.Errorf("node %s: write: %w", c.p.cfg.Addr, err))
			c.mu.Lock()
			continue
		}
		// The batch's commands come just before those queued meanwhile;
		// the reader may have answered some of them already.
		now, end := time.Now(), len(c.queue)-c.unwritten
		for i := max(end-n, c.head); i < end; i++ {
			c.queue[i].sent = now
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
	c.queue, c.head, c.out, c.unwritten, c.checked = nil, 0, nil, 0, nil
	nc := c.nc
	c.mu.Unlock()
	if nc != nil {
		_ = nc.Close()
	}
	for _, w := range queued {
		w.done(nil, "", err)
	}
}

func (c *pipeConn) dropIfStale(limit time.Duration) {
	c.mu.Lock()
	stale := c.head < len(c.queue) && c.queue[c.head].sentBy(time.Now().Add(-limit))
	c.stale = c.stale || stale
	c.mu.Unlock()
	if stale {
		c.fail(fmt.Errorf("node %s: no answer for %v: %w", c.p.cfg.Addr, limit, context.DeadlineExceeded))
	}
}

// open dials, runs the handshake, and then writes whatever was queued
// meanwhile.
func (c *pipeConn) open() {
	cfg := c.p.cfg
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
	defer cancel()
	nc, err := cfg.Dial(ctx)
	if err != nil {
		c.failOpen(fmt.Errorf("node %s: %w", cfg.Addr, err))
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
	r := bufio.NewReaderSize(counted{nc, c}, 16<<10)
	tag, err := cfg.Handshake(ctx, nc, r)
	if err != nil {
		c.failOpen(fmt.Errorf("node %s: %w", cfg.Addr, err))
		return
	}
	_ = nc.SetDeadline(time.Time{})
	// The handshake's replies are read: only bytes past them wait unread.
	c.parsed.Store(c.received.Load() - int64(r.Buffered()))
	go c.read(r)
	c.p.setUnreachable(nil)
	c.mu.Lock()
	c.ready, c.tag = true, tag
	c.flush()
}

// failOpen fails a connection that could not be opened, and says so for
// Unreachable.
func (c *pipeConn) failOpen(err error) {
	c.p.setUnreachable(err)
	c.fail(err)
}

// read hands every reply to the oldest waiting command, until the
// connection breaks.
func (c *pipeConn) read(r *bufio.Reader) {
	for {
		v, err := ReadReply(r)
		if err != nil {
			c.fail(fmt.Errorf("node %s: %w", c.p.cfg.Addr, err))
			return
		}
		c.parsed.Store(c.received.Load() - int64(r.Buffered()))
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return
		}
		if c.head == len(c.queue) {
			c.mu.Unlock()
			c.fail(fmt.Errorf("node %s: %w: reply to no command", c.p.cfg.Addr, ErrProtocol))
			return
		}
		w := c.queue[c.head]
		if !Fits(w.want, v) {
			c.mu.Unlock()
			c.fail(fmt.Errorf("node %s: %w: a reply %#v that does not fit its command", c.p.cfg.Addr, ErrProtocol, v))
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
		tag := c.tag
		c.mu.Unlock()
		w.done(v, tag, nil)
	}
}

// Exchange writes cmds at once and reads one reply per command, for the
// handshake, before the reader goroutine owns the connection. Any error —
// the deadline included — leaves replies owed on the connection, so the
// caller must close it; a reply that does not fit its command is an error.
func Exchange(ctx context.Context, nc net.Conn, r *bufio.Reader, cmds ...Command) ([]any, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	var b []byte
	for _, cmd := range cmds {
		b = AppendCommand(b, cmd.Args...)
	}
	if _, err := nc.Write(b); err != nil {
		return nil, err
	}
	out := make([]any, len(cmds))
	for i, cmd := range cmds {
		v, err := ReadReply(r)
		if err != nil {
			return nil, err
		}
		if !Fits(cmd.Want, v) {
			return nil, fmt.Errorf("%w: %s answered %#v", ErrProtocol, cmd.Args[0], v)
		}
		out[i] = v
	}
	return out, nil
}

// Command is one command for Exchange and the shape of its reply.
type Command struct {
	Args []string
	Want Shape
}
