package localredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

const (
	logName      = "redis.log"
	aclName      = "users.acl" // the node's ACL file, written at every start
	readyTimeout = 10 * time.Second
	readyPoll    = 10 * time.Millisecond
	stopGrace    = 3 * time.Second
	logTailBytes = 2048
)

var (
	errNotRunning   = errors.New("localredis: node is not running")
	errStopped      = errors.New("localredis: cluster is stopped")
	errPortInUse    = errors.New("port already in use")
	errNoJobControl = errors.New("localredis: pause/resume needs SIGSTOP/SIGCONT, not available on this OS")
)

// Node is one Redis server of a Cluster. It keeps its port (and data
// directory) for its whole life, so clients configured with its address
// reconnect to it after Start or Restart. Its methods are safe for concurrent
// use; lifecycle operations run one at a time.
type Node struct {
	c     *Cluster
	index int
	dir   string // data dir; "" for in-process nodes

	opMu sync.Mutex // serialises Start/Stop/Kill/Pause/Resume/Restart

	mu     sync.Mutex // guards the fields below; never held while waiting
	port   int
	proc   *process // last started redis-server; nil if never started
	paused bool
	mr     *miniredis.Miniredis // in-process server, kept while stopped if AOF emulation keeps data
	gate   *gate                // in-process: non-nil while running
}

// Index is the node's position in Cluster.Nodes.
func (n *Node) Index() int { return n.index }

// Addr is "127.0.0.1:port"; it does not change across Stop/Start/Restart.
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
}

// URL is the node's URL for the app: "redis://127.0.0.1:port", with
// ":password@" if Options.Password is set, or with the app user's
// "flashsale:password@" when the node runs the ACL (Options.ACL).
func (n *Node) URL() string { return nodeURL(n.Addr(), n.c.app()) }

// AdminURL is the node's URL for operator actions (flushes, CONFIG, DEBUG,
// replication …): with the ACL, the admin user's
// "redis://flashsale-admin:password@127.0.0.1:port"; without it, URL.
func (n *Node) AdminURL() string { return nodeURL(n.Addr(), n.c.admin()) }

// PID is the redis-server process id, or 0 when the node is not running or
// is in-process.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.exited() {
		return 0
	}
	return n.proc.pid
}

// Exited is closed when the node's current redis-server exits, by a Stop,
// a Kill or on its own (a kill -9 from outside); it is closed already when
// no process is running, and never for in-process nodes, which nothing
// outside can kill. Start gives the node a new process, so ask again after
// it.
func (n *Node) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.c.inProcess:
		return nil
	case n.proc == nil:
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return n.proc.done
}

// Running reports whether the node's server is up (a paused node is running).
// A redis-server that died on its own counts as not running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c.inProcess {
		return n.gate != nil
	}
	return n.proc != nil && !n.proc.exited()
}

// Start starts a stopped or killed node again on the same port, keeping its
// data directory: with AOF its data survives, without it comes back empty.
// It waits until the node answers PING. Starting a running node does nothing.
func (n *Node) Start(ctx context.Context) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	if n.c.isStopped() {
		return errStopped
	}
	if n.Running() {
		return nil
	}
	return n.start(ctx)
}

// Stop stops the node gracefully — SIGTERM, so with AOF it flushes — and waits
// until it has exited and its port is free. If it has not exited after 3s, or
// when ctx ends first, it is killed; in the latter case Stop returns ctx's
// error. Stopping a node that is already down is not an error.
func (n *Node) Stop(ctx context.Context) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	return n.stop(ctx, true)
}

// Kill kills the node (SIGKILL: no flush, like a crash or power loss) and
// waits until it has exited. Killing a node that is already down is not an
// error.
func (n *Node) Kill() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	return n.stop(context.Background(), false)
}

// Pause freezes the node: a redis-server gets SIGSTOP, so the kernel still
// accepts TCP connections but nothing is answered until Resume — the shape of
// a long GC pause or a stalled VM. It returns once the process is stopped.
//
// In-process nodes are paused by a miniredis pre-command hook that blocks
// every command, on every connection, until Resume; connections are still
// accepted. A command already past the hook (e.g. a blocked BLPOP) finishes,
// as it would have on a process stopped a moment later.
func (n *Node) Pause() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	if n.c.inProcess {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.gate == nil {
			return errNotRunning
		}
		n.gate.pause()
		n.paused = true
		return nil
	}
	running, err := n.jobControl(sigStop, "pause", func(s byte) bool { return s == 'T' })
	if err != nil {
		return err
	}
	if !running {
		return errNotRunning
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
	return nil
}

// Resume undoes Pause (SIGCONT). Resuming a node that is not paused does
// nothing.
func (n *Node) Resume() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	return n.resume()
}

func (n *Node) resume() error {
	if n.c.inProcess {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.gate != nil {
			n.gate.resume()
		}
		n.paused = false
		return nil
	}
	if sigCont == nil {
		return errNoJobControl
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	// Signal even if we did not pause it: someone else may have.
	_, err := n.jobControl(sigCont, "resume", func(s byte) bool { return s != 'T' })
	return err
}

// jobControl sends sig (SIGSTOP or SIGCONT) to the node's process, if one
// runs, and waits until the process's state satisfies done; running is
// false when there was no process to signal.
func (n *Node) jobControl(sig os.Signal, verb string, done func(state byte) bool) (running bool, err error) {
	if sig == nil {
		return false, errNoJobControl
	}
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil || p.exited() {
		return false, nil
	}
	if err := p.signal(sig); err != nil {
		return true, fmt.Errorf("localredis: %s node %d: %w", verb, n.index, err)
	}
	waitProcState(p, done)
	return true, nil
}

// Restart kills the node (SIGKILL) and starts it again on the same port.
// keepData=false wipes its data directory first, so it comes back empty
// whatever the persistence settings — the "restart with data loss" fault
// Redlock is sensitive to. keepData=true keeps the directory; the data
// survives only with AOF (and only what was fsynced: use AppendFsync
// "always" to lose nothing).
func (n *Node) Restart(ctx context.Context, keepData bool) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	if n.c.isStopped() {
		return errStopped
	}
	if err := n.stop(ctx, false); err != nil {
		return err
	}
	if !keepData {
		if err := n.wipe(); err != nil {
			return err
		}
	}
	return n.start(ctx)
}

// shutdown is Cluster.Stop's per-node part: graceful, with the 3s grace.
func (n *Node) shutdown() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	return n.stop(context.Background(), true)
}

func (n *Node) start(ctx context.Context) error {
	n.mu.Lock()
	port := n.port
	n.mu.Unlock()
	if n.c.inProcess {
		return n.startMini(port)
	}
	return n.startProc(ctx, port)
}

// startFirst starts a new node on a free port. The port is free when we look
// but may be taken before redis binds it, so on "address in use" it tries
// another one.
func (n *Node) startFirst(ctx context.Context) error {
	if n.c.inProcess {
		return n.startMini(0) // miniredis binds :0 itself, no race
	}
	var err error
	for range startAttempts {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		if err = n.startProc(ctx, port); !errors.Is(err, errPortInUse) {
			return err
		}
		n.c.log.Debug("localredis: port taken, retrying", "node", n.index, "port", port)
	}
	return err
}

func (n *Node) stop(ctx context.Context, graceful bool) error {
	if n.c.inProcess {
		return n.stopMini()
	}
	n.mu.Lock()
	p := n.proc
	n.paused = false
	n.mu.Unlock()
	if p == nil || p.exited() {
		return nil
	}
	if !graceful || sigCont == nil {
		return n.killProc(p)
	}
	if err := p.signal(sigTerm); err != nil {
		return fmt.Errorf("localredis: stop node %d: %w", n.index, err)
	}
	// A paused process acts on SIGTERM only once continued.
	if err := p.signal(sigCont); err != nil {
		return fmt.Errorf("localredis: stop node %d: %w", n.index, err)
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	var ctxErr error
	select {
	case <-p.done:
		n.c.log.Info("localredis: node stopped", "node", n.index, "pid", p.pid)
		return nil
	case <-grace.C:
		n.c.log.Warn("localredis: node ignored SIGTERM, killing", "node", n.index, "pid", p.pid)
	case <-ctx.Done():
		ctxErr = fmt.Errorf("localredis: stop node %d: killed: %w", n.index, ctx.Err())
	}
	return errors.Join(ctxErr, n.killProc(p))
}

// wipe empties the data directory but keeps redis.log, which tells the story
// of every run of the node.
func (n *Node) wipe() error {
	if n.c.inProcess {
		n.mu.Lock()
		n.mr = nil
		n.mu.Unlock()
		return nil
	}
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		return fmt.Errorf("localredis: wipe node %d: %w", n.index, err)
	}
	for _, e := range entries {
		if e.Name() == logName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(n.dir, e.Name())); err != nil {
			return fmt.Errorf("localredis: wipe node %d: %w", n.index, err)
		}
	}
	return nil
}
