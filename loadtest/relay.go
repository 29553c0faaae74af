package loadtest

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// relay is a TCP relay the app instances reach one Redis node through. It
// changes nothing a client sees while the node runs; it exists for the
// moments the node is down.
//
// Why: a go-redis client that met as many refused dials as its pool size
// stops dialling and probes the node once a second. A node that is back
// after 50 ms would stay out of the client's reach for up to a second — and
// the node-restart scenario would measure that back-off, not the lock: a
// restart-aware Redlock and an unaware one would both "hold", for the same
// wrong reason. Through the relay a dial always connects; while the node is
// down the relay closes the connection at once (the client sees a dead
// connection, not a refused dial, so it keeps trying), and the first dial
// after the node is back reaches it. Connections open when the node dies
// are closed, exactly as the node's own would be. Nothing a client sent is
// ever held back and delivered later.
type relay struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startRelay listens on a free loopback port and relays to upstream.
func startRelay(upstream string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	r.wg.Go(r.serve)
	return r, nil
}

// Addr is the relay's "127.0.0.1:port".
func (r *relay) Addr() string { return r.ln.Addr().String() }

func (r *relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		if !r.track(c) {
			c.Close()
			return
		}
		r.wg.Go(func() { r.pipe(c) })
	}
}

// track registers a connection so Close can end it; false once closed.
func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

// pipe connects one client to the node — or closes it at once when the
// node is down — then copies both ways until either side ends, and closes
// both.
func (r *relay) pipe(client net.Conn) {
	defer r.untrack(client)
	up, err := net.DialTimeout("tcp", r.upstream, time.Second)
	if err != nil {
		return
	}
	if !r.track(up) {
		up.Close()
		return
	}
	defer r.untrack(up)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // ends when either side closes; both are closed below
		done <- struct{}{}
	}
	go cp(up, client)
	go cp(client, up)
	<-done
	client.Close()
	up.Close()
	<-done
}

// Close stops accepting, ends every relayed connection and waits for the
// relay's goroutines.
func (r *relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
