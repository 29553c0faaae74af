package lock_test

import (
	"net"
	"sync"
	"testing"
)

// relayProxy relays one Redis node over TCP, both ways, and hands every
// chunk a client sends to the test's fault before it goes on: the fault may
// delay it, or cut the connection (the chunk is dropped and both sides are
// reset, as a connection that breaks while the bytes go out drops them). It
// wraps the real node; it never answers for it.
type relayProxy struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// chunkFault decides what happens to one chunk a client sends; newFault
// makes one per connection, so a fault may keep state per connection.
type chunkFault func(chunk []byte) (cut bool)

func newRelayProxy(t *testing.T, upstream string, newFault func() chunkFault) *relayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &relayProxy{ln: ln}
	p.wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = down.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, down, up)
			p.mu.Unlock()
			p.wg.Go(func() { relay(up, down, newFault()) })
			p.wg.Go(func() { relay(down, up, nil) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *relayProxy) addr() string { return p.ln.Addr().String() }

// relay copies src to dst, each chunk through fault when there is one.
func relay(dst, src net.Conn, fault chunkFault) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fault != nil && fault(buf[:n]) {
				for _, c := range []net.Conn{src, dst} {
					if tc, ok := c.(*net.TCPConn); ok {
						_ = tc.SetLinger(0) // Close then sends RST
					}
				}
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
