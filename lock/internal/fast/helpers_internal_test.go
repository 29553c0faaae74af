package fast

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/wire"
)

// testNode is a node as the lockers give it: a client and a votes'
// connection, here with no handshake.
type testNode struct {
	rdb  *redis.Client
	pipe *wire.Pipe
}

// Client is the node's client.
func (n testNode) Client() *redis.Client { return n.rdb }

// Pipe is the node's votes' connection.
func (n testNode) Pipe() *wire.Pipe { return n.pipe }

// newTestNode is a node reached with o, closed when the test ends; dial, if
// set, opens its votes' connection.
func newTestNode(t *testing.T, o *redis.Options, dial func(ctx context.Context) (net.Conn, error)) testNode {
	t.Helper()
	if dial == nil {
		dial = func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "tcp", o.Addr) }
	}
	n := testNode{rdb: redis.NewClient(o), pipe: wire.NewPipe(wire.Config{
		Addr: o.Addr, DialTimeout: time.Second, WriteTimeout: time.Second, Dial: dial,
		Handshake: func(context.Context, net.Conn, *bufio.Reader) (string, error) { return "", nil },
	})}
	t.Cleanup(func() {
		n.pipe.Close()
		_ = n.rdb.Close()
	})
	return n
}

// testConfig is the lockers' default configuration for a TTL of 2 s.
func testConfig(ns string) Config {
	return Config{TTL: 2 * time.Second, Timeout: 100 * time.Millisecond, Late: 400 * time.Millisecond, Namespace: ns,
		Lines: true, BackoffMin: time.Millisecond, BackoffMax: 250 * time.Millisecond}
}

// newTestWaker is a listening waker over nodes whose leases are ints,
// closed when the test ends.
func newTestWaker(t *testing.T, cfg Config, nodes ...Node) *Waker[*int] {
	t.Helper()
	w := New(cfg, nodes, func(*int) time.Time { return time.Time{} }, func(context.Context, *int) {})
	w.Listen()
	t.Cleanup(w.Close)
	return w
}
