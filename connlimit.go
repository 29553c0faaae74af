package main

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"flashsale/handlers"
)

// defaultMaxConnsPerClient is -max-conns-per-client's default: far more
// than a browser opens (six per host over HTTP/1.1, its streams included),
// few enough that one address cannot hold the server's file descriptors.
const defaultMaxConnsPerClient = 64

// connCap is a listener that holds each client address to at most max open
// connections. A connection past it is answered 429 too_many_connections at
// once, before any request is read, and closed. This machine's own
// addresses (handlers.IsOwnMachine: the load runner opens hundreds) and
// the trusted proxies (every client behind one shares its address) are not
// counted.
type connCap struct {
	net.Listener
	max     int
	spared  []netip.Prefix
	refused func()
	log     *slog.Logger

	mu   sync.Mutex
	open map[netip.Addr]int
}

// capConns wraps ln, or returns it as it is when max is negative (no cap).
// proxies are -trusted-proxies: addresses or CIDR ranges.
func capConns(ln net.Listener, max int, proxies []string, refused func(), log *slog.Logger) (net.Listener, error) {
	if max < 0 {
		return ln, nil
	}
	l := &connCap{Listener: ln, max: max, refused: refused, log: log, open: map[netip.Addr]int{}}
	for _, p := range proxies {
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			addr, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return nil, err
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		l.spared = append(l.spared, prefix)
	}
	return l, nil
}

// Accept returns the next connection within its address's cap; the ones
// past it are refused here and never reach the server.
func (l *connCap) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
		if err != nil {
			return c, nil // not an IP peer (a Unix socket): nothing to count
		}
		addr := ap.Addr().Unmap()
		if l.isSpared(addr) {
			return c, nil
		}
		l.mu.Lock()
		full := l.open[addr] >= l.max
		if !full {
			l.open[addr]++
		}
		l.mu.Unlock()
		if full {
			l.refuse(c, addr)
			continue
		}
		return &cappedConn{Conn: c, done: sync.OnceFunc(func() { l.closed(addr) })}, nil
	}
}

func (l *connCap) isSpared(addr netip.Addr) bool {
	if handlers.IsOwnMachine(addr.AsSlice()) {
		return true
	}
	for _, p := range l.spared {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// refuse answers c 429 and closes it, without waiting on a client that
// does not read: the answer is small enough for the socket's buffer.
func (l *connCap) refuse(c net.Conn, addr netip.Addr) {
	l.refused()
	l.log.Debug("connection refused: too many from one address", "client", addr, "max", l.max)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(handlers.RawAnswer("too_many_connections"))
	_ = c.Close()
}

func (l *connCap) closed(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
}

// cappedConn gives its place back when it closes, once.
type cappedConn struct {
	net.Conn
	done func()
}

func (c *cappedConn) Close() error {
	c.done()
	return c.Conn.Close()
}
