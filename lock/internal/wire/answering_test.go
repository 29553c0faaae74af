package wire

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// TestFrozenNodeIsSilent: a node that answered the handshake and then
// stopped answering, its connection open (a paused process), is neither
// answering nor anything but silent once a command written to it goes
// unanswered, however recently it was written. The handshake's replies,
// read long ago, are not bytes waiting to be read.
func TestFrozenNodeIsSilent(t *testing.T) {
	addr, got := node(t, false)
	p := NewPipe(Config{
		Addr: addr, DialTimeout: time.Second, WriteTimeout: time.Second,
		Dial: func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "tcp", addr) },
		Handshake: func(ctx context.Context, nc net.Conn, r *bufio.Reader) (string, error) {
			_, err := Exchange(ctx, nc, r, Command{Args: []string{"PING"}, Want: Bulk})
			return "", err
		},
	})
	defer p.Close()
	opened(t, p)
	if p.Silent(0) {
		t.Fatal("a node that owes nothing is silent")
	}
	before := time.Now()
	p.Send([]string{"INCR", "k"}, Integer, func(any, string, error) {})
	<-got
	if p.Answering(before) {
		t.Error("a node that answered nothing written to it since its handshake counts as answering")
	}
	if !p.Silent(0) {
		t.Error("a node that owes an answer and sends nothing is not silent")
	}
}

// TestLateReaderIsAnswering is the control: a node that answers while
// this process does not read (too busy) is answering, never silent.
func TestLateReaderIsAnswering(t *testing.T) {
	addr, _ := node(t, true)
	thaw := make(chan struct{})
	defer close(thaw) // before the pipe closes: a frozen reader would hold it
	p := NewPipe(Config{
		Addr: addr, DialTimeout: time.Second, WriteTimeout: time.Second,
		Dial: func(ctx context.Context) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return unreadConn{nc, thaw}, err
		},
		Handshake: func(context.Context, net.Conn, *bufio.Reader) (string, error) { return "", nil },
	})
	defer p.Close()
	opened(t, p)
	p.Send([]string{"INCR", "k"}, Integer, func(any, string, error) {})
	deadline := time.Now().Add(5 * time.Second)
	for !p.Answering(time.Now()) {
		if time.Now().After(deadline) {
			t.Fatal("a node whose answer waits unread never counted as answering")
		}
		time.Sleep(time.Millisecond)
	}
	if p.Silent(0) {
		t.Error("a node whose answer waits unread is silent")
	}
}

// node is a node on a loopback port that answers PING and, if answers,
// every other command with :1; got has a value for each read it made
// after the PING.
func node(t *testing.T, answers bool) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	got := make(chan struct{}, 16)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := bufio.NewReader(nc)
		if _, err := ReadReply(r); err != nil { // the PING, as an array
			return
		}
		_, _ = nc.Write([]byte("+PONG\r\n"))
		for {
			if _, err := ReadReply(r); err != nil {
				return
			}
			got <- struct{}{}
			if answers {
				_, _ = nc.Write([]byte(":1\r\n"))
			}
		}
	}()
	return ln.Addr().String(), got
}

// opened opens p and waits until its connection is open, nothing owed.
func opened(t *testing.T, p *Pipe) {
	t.Helper()
	p.Open()
	deadline := time.Now().Add(5 * time.Second)
	for !p.Answering(time.Now()) {
		if time.Now().After(deadline) {
			t.Fatal("the connection never opened")
		}
		time.Sleep(time.Millisecond)
	}
}

// unreadConn is a real connection whose reads wait until thaw is closed.
type unreadConn struct {
	net.Conn
	thaw <-chan struct{}
}

func (c unreadConn) Read(b []byte) (int, error) {
	<-c.thaw
	return c.Conn.Read(b)
}

// NetConn is the connection beneath: its unread bytes say the node answers.
func (c unreadConn) NetConn() net.Conn { return c.Conn }
