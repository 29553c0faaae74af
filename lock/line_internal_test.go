package lock

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/testsupport"
	"flashsale/lock/internal/wire"
)

// TestLineJoinReadLate: joining a key's line, a process too busy to read
// the first node's answer within the per-node timeout still stands in the
// line once it reads it, within the late window; given up on at the
// timeout, a saturated process would leave the line at every look, and its
// waiters would fall back to trying all at once. A first node whose answer
// never comes is still no line.
func TestLineJoinReadLate(t *testing.T) {
	cluster := testsupport.Redis(t, 1)
	addr := cluster.Addrs()[0]
	raw := redis.NewClient(testsupport.Options(t, cluster)[0])
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := &config{ttl: 10 * time.Second, nodeTimeout: 50 * time.Millisecond, namespace: "jl:"}

	for _, tc := range []struct {
		name   string
		freeze time.Duration // how long the reader is kept from the socket; 0: for good
		want   int64
	}{
		{"read after the per-node timeout", 100 * time.Millisecond, 1},
		{"never read", 0, noLine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			thaw := make(chan struct{})
			var once sync.Once
			unfreeze := func() { once.Do(func() { close(thaw) }) }
			defer unfreeze() // before the pipe closes: a frozen reader would hold it
			p := wire.NewPipe(wire.Config{
				Addr: addr, DialTimeout: time.Second, WriteTimeout: time.Second,
				Dial: func(ctx context.Context) (net.Conn, error) {
					nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
					return frozenConn{nc, thaw}, err
				},
				Handshake: func(context.Context, net.Conn, *bufio.Reader) (string, error) { return "", nil },
			})
			defer p.Close()
			q := newLine(cfg, p)
			key := "jl:lock:" + t.Name()
			if err := raw.Set(ctx, key, "holder", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if tc.freeze > 0 {
				time.AfterFunc(tc.freeze, unfreeze)
			}
			began := time.Now()
			if got := q.join(ctx, key); got != tc.want {
				t.Fatalf("place %d after %v, want %d (per-node timeout %v, late window %v)",
					got, time.Since(began).Round(time.Millisecond), tc.want, cfg.nodeTimeout, q.late)
			}
		})
	}
}

// frozenConn is a real connection whose reads wait until thaw is closed.
type frozenConn struct {
	net.Conn
	thaw <-chan struct{}
}

func (c frozenConn) Read(b []byte) (int, error) {
	<-c.thaw
	return c.Conn.Read(b)
}

// NetConn is the connection beneath: its unread bytes say the node answers.
func (c frozenConn) NetConn() net.Conn { return c.Conn }
