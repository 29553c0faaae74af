package localredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// startMini serves an in-process node on port (0 = any free port).
//
// Without AOF every start gets a fresh miniredis, matching a redis-server
// that comes back empty. With AOF the old instance is reused, so data
// survives Stop, Kill and Restart(keepData=true) — miniredis has no disk, and
// this emulates appendfsync always.
func (n *Node) startMini(port int) error {
	n.mu.Lock()
	mr := n.mr
	n.mu.Unlock()
	if mr == nil || !n.c.opts.AOF {
		mr = miniredis.NewMiniRedis()
		// TTLs follow the wall clock (checked lazily on every access), so
		// keys expire in real time without a FastForward loop.
		mr.ClockTTL(true)
		if n.c.opts.Password != "" {
			mr.RequireAuth(n.c.opts.Password)
		}
	} else {
		// Close cancelled the old context, which would make blocking
		// commands (BLPOP …) give up at once after the restart. Nothing uses
		// the closed instance, so replacing it here is race-free.
		mr.Ctx, mr.CtxCancel = context.WithCancel(context.Background())
	}
	if err := n.bindMini(mr, port); err != nil {
		return fmt.Errorf("localredis: start in-process node %d: %w", n.index, err)
	}
	g := &gate{}
	// Set after StartAddr, which installs miniredis' own (nil) hook.
	mr.Server().SetPreHook(g.hook)
	n.mu.Lock()
	n.mr, n.gate, n.paused = mr, g, false
	n.port = mr.Server().Addr().Port
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
	n.mu.Unlock()
	n.c.log.Info("localredis: in-process node started", "node", n.index, "addr", addr)
	return nil
}

// rebindWait bounds how long a restarted in-process node waits for its old
// port, which the kernel can still count as taken for a moment after the
// listener closed (about one restart in ten here, in TestRestartData).
const rebindWait = 2 * time.Second

// bindMini serves mr on port, waiting up to rebindWait for a port still
// held by the node's own previous life (port 0 never waits).
func (n *Node) bindMini(mr *miniredis.Miniredis, port int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(rebindWait)
	for {
		err := mr.StartAddr(addr)
		if err == nil || port == 0 || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopMini closes the in-process server. Stop and Kill are the same here.
func (n *Node) stopMini() error {
	n.mu.Lock()
	mr, g := n.mr, n.gate
	n.paused = false
	n.mu.Unlock()
	if g == nil {
		return nil
	}
	// Release paused commands first (and drop them): Close waits for every
	// connection's goroutine, including those parked in the hook.
	g.close()
	mr.Close()
	n.mu.Lock()
	n.gate = nil
	if !n.c.opts.AOF {
		n.mr = nil
	}
	n.mu.Unlock()
	n.c.log.Info("localredis: in-process node stopped", "node", n.index)
	return nil
}

// gate is the in-process stand-in for SIGSTOP: miniredis calls hook before
// every command (including those a Lua script issues) and the hook waits
// while the gate is paused. One gate per server run, so a closed gate never
// leaks into the next run.
type gate struct {
	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed on resume
	closed bool          // node is going down: drop commands unanswered
}

func (g *gate) hook(*server.Peer, string, ...string) bool {
	g.mu.Lock()
	ch := g.paused
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// true = "handled": the command never runs and gets no reply, like one
	// sent to a process that is killed while stopped.
	return g.closed
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil && !g.closed {
		g.paused = make(chan struct{})
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
	}
}

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.resume()
}
