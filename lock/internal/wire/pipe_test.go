package wire

import (
	"net"
	"testing"
	"time"
)

// announcing tells on writing when a Write begins; over net.Pipe the Write
// then blocks until the other end reads.
type announcing struct {
	net.Conn
	writing chan struct{}
}

func (a announcing) Write(b []byte) (int, error) {
	a.writing <- struct{}{}
	return a.Conn.Write(b)
}

// openPipe is a pipe whose open connection is one end of a net.Pipe, and
// the other end, the node's; writing hears of each write as it begins
// (up to buffered before one is taken).
func openPipe(t *testing.T, buffered int) (*Pipe, *pipeConn, net.Conn, chan struct{}) {
	client, server := net.Pipe()
	t.Cleanup(func() { _ = server.Close() })
	writing := make(chan struct{}, buffered)
	p := &Pipe{cfg: Config{Addr: "test", WriteTimeout: time.Minute}}
	c := &pipeConn{p: p, nc: announcing{client, writing}, ready: true}
	p.conn = c
	return p, c, server, writing
}

// A command counts from when its bytes were written, not from when it was
// queued. While this process is still writing it (too busy to, on a
// saturated machine), the node owes no reply and is answering, and its
// connection is not dropped as stale; once written and unanswered, the
// node is silent as before, and the connection stale.
func TestUnwrittenCommandsOweNoReply(t *testing.T) {
	p, c, server, writing := openPipe(t, 1)

	sent := make(chan struct{})
	go func() {
		p.Send([]string{"INCR", "k"}, Integer, func(any, string, error) {})
		close(sent)
	}()
	<-writing // queued long ago, as far as the node can tell: not yet written
	if !p.Answering(time.Now()) {
		t.Fatal("a node that was never sent the command counts as silent")
	}
	p.DropIfSilent(0)
	if c.broken() {
		t.Fatal("a connection whose only command is not written yet was dropped as stale")
	}

	buf := make([]byte, 64)
	if _, err := server.Read(buf); err != nil { // the node takes the command
		t.Fatal(err)
	}
	<-sent
	if p.Answering(time.Now()) {
		t.Fatal("a node that never answered a command written to it counts as answering")
	}
	p.DropIfSilent(0)
	if !c.broken() {
		t.Fatal("a connection owing the reply to a written command was not dropped as stale")
	}
}
