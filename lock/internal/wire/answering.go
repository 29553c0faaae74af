package wire

import (
	"net"
	"time"
)

// What a pipe can tell of its node between a command and its reply: slow
// here (this process too busy to read the reply, or to write the command)
// or down there (a node paused or cut off sends nothing, its connection
// open all the same).
//
// A node shows it is up only by bytes: bytes that arrived, or that wait to
// be read, in the socket's receive buffer or the reader's. A command still
// waiting to be written is not owed a reply, so it says nothing against
// the node. Nothing else counts: a command written and not answered is
// what a frozen node looks like, however recently it was written.

// Answering reports whether the node is answering, though a command sent
// at since may not have been handed its reply yet: bytes arrived on the
// connection after since, or bytes wait to be read, or no command written
// to it is owed a reply (the one waited for is not written yet: this
// process is slow). It says nothing of a connection that is broken or not
// open.
func (p *Pipe) Answering(since time.Time) bool {
	c := p.open()
	if c == nil {
		return false
	}
	c.mu.Lock()
	owes := c.head < len(c.queue) && !c.queue[c.head].sent.IsZero()
	c.mu.Unlock()
	return !owes || c.showed(since)
}

// Silent reports whether the node has owed a reply for d or longer and
// shown nothing in that time: a command written d ago or earlier is not
// answered, and no bytes arrived since then or wait to be read. A pipe
// that has been opening a connection for d or longer, counted from the
// last one that worked, is silent too (a frozen node accepts connections
// and answers no handshake). A pipe that never opened a connection is
// not; one whose connection broke opens a new one now, as the next
// command would, and is judged by it.
func (p *Pipe) Silent(d time.Duration) bool {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c == nil {
		return false
	}
	if c.broken() {
		c = p.current()
	}
	since := time.Now().Add(-d)
	c.mu.Lock()
	ready, failed := c.ready, c.err != nil
	owes := c.head < len(c.queue) && c.queue[c.head].sentBy(since)
	c.mu.Unlock()
	switch {
	case failed:
		return false
	case !ready:
		return !c.trying.After(since)
	}
	return owes && !c.showed(since)
}

// Unreachable is why the pipe's last connection could not be opened (a
// node that refuses connections, or one that never finished the
// handshake), unless one has opened since; nil otherwise.
func (p *Pipe) Unreachable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unreachable
}

func (p *Pipe) setUnreachable(err error) {
	p.mu.Lock()
	p.unreachable = err
	p.mu.Unlock()
}

// open is the pipe's connection if it is open and not broken.
func (p *Pipe) open() *pipeConn {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	ok := c.ready && c.err == nil
	c.mu.Unlock()
	if !ok {
		return nil
	}
	return c
}

// showed reports whether bytes arrived after since or wait to be read. A
// paused or cut-off node sends nothing, and whatever arrived before it
// stopped is soon read.
func (c *pipeConn) showed(since time.Time) bool {
	return c.arrived.Load() > since.UnixNano() || c.received.Load() > c.parsed.Load() || unread(c.nc) > 0
}

// counted counts what the reader takes off the socket, for Answering.
type counted struct {
	net.Conn
	c *pipeConn
}

func (r counted) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if n > 0 {
		r.c.received.Add(int64(n))
		r.c.arrived.Store(time.Now().UnixNano())
	}
	return n, err
}
