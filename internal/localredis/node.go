package localredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"

	"flashsale/internal/databirth"
)

const (
	logName      = "redis.log"
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

// process is one redis-server run. done is closed by the goroutine that
// reaps it, so the node never leaves a zombie and every waiter can select on it.
type process struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
	err  error // exit status; read only after done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends s; a process that has already exited is not an error, since
// callers only want it gone or frozen. os.Process uses a pidfd on Linux, so a
// reaped PID that the kernel reused is never signalled by mistake.
func (p *process) signal(s os.Signal) error {
	if err := p.cmd.Process.Signal(s); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Index is the node's position in Cluster.Nodes.
func (n *Node) Index() int { return n.index }

// Addr is "127.0.0.1:port"; it does not change across Stop/Start/Restart.
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
}

// URL is "redis://127.0.0.1:port", with ":password@" if a password is set.
func (n *Node) URL() string { return nodeURL(n.Addr(), n.c.opts.Password) }

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
	if sigStop == nil {
		return errNoJobControl
	}
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil || p.exited() {
		return errNotRunning
	}
	if err := p.signal(sigStop); err != nil {
		return fmt.Errorf("localredis: pause node %d: %w", n.index, err)
	}
	waitProcState(p, func(s byte) bool { return s == 'T' })
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
	p := n.proc
	n.paused = false
	n.mu.Unlock()
	if p == nil || p.exited() {
		return nil
	}
	// Signal even if we did not pause it: someone else may have.
	if err := p.signal(sigCont); err != nil {
		return fmt.Errorf("localredis: resume node %d: %w", n.index, err)
	}
	waitProcState(p, func(s byte) bool { return s != 'T' })
	return nil
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

func (n *Node) killProc(p *process) error {
	if p.exited() {
		return nil
	}
	if err := p.signal(os.Kill); err != nil {
		return fmt.Errorf("localredis: kill node %d: %w", n.index, err)
	}
	<-p.done
	n.c.log.Info("localredis: node killed", "node", n.index, "pid", p.pid)
	return nil
}

// startProc runs redis-server on port and waits until it answers PING.
func (n *Node) startProc(ctx context.Context, port int) error {
	logPath := filepath.Join(n.dir, logName)
	lf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localredis: %w", err)
	}
	// Only this run's part of the log explains a failure of this run.
	offset, err := lf.Seek(0, io.SeekEnd)
	if err != nil {
		lf.Close()
		return fmt.Errorf("localredis: %w", err)
	}
	cmd := exec.Command(n.c.binary, n.c.argv(port, n.dir)...)
	cmd.Dir = n.dir
	// Errors printed before redis opens --logfile (bad arguments) land in the
	// same file.
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = sysProcAttr()
	// Fork from a fresh goroutine: Pdeathsig fires when the forking OS thread
	// exits, and a caller locked to its thread (runtime.LockOSThread) would
	// take the node down with it when it returns. Unlocked goroutines run on
	// runtime threads that live as long as the process.
	started := make(chan error, 1)
	go func() { started <- cmd.Start() }()
	err = <-started
	lf.Close()
	if err != nil {
		return fmt.Errorf("localredis: start node %d: %w", n.index, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.mu.Lock()
	n.port, n.proc, n.paused = port, p, false
	n.mu.Unlock()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := n.waitReady(ctx, p, addr); err != nil {
		_ = n.killProc(p)
		tail := readTail(logPath, offset)
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w (%w)", errPortInUse, err)
		}
		return fmt.Errorf("localredis: node %d (%s, pid %d) did not come up: %w\n--- tail of %s ---\n%s",
			n.index, addr, p.pid, err, logPath, tail)
	}
	n.c.log.Info("localredis: node started", "node", n.index, "addr", addr, "pid", p.pid, "aof", n.c.opts.AOF)
	n.markBirth(ctx, addr)
	return nil
}

// waitReady polls until our process answers on addr, it exits, or ~10s pass.
func (n *Node) waitReady(ctx context.Context, p *process, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	// A probe in flight is cut short when the process exits.
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		last := probe(ctx, addr, n.c.opts.Password, p.pid)
		if last == nil {
			return nil
		}
		select {
		case <-tick.C:
			continue
		case <-p.done:
		case <-ctx.Done():
		}
		if p.exited() {
			return fmt.Errorf("redis-server exited: %v", p.err)
		}
		return fmt.Errorf("no answer to PING: %w (last try: %v)", ctx.Err(), last)
	}
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

// freePort asks the kernel for a free loopback port. It is free only until
// someone else takes it; startFirst retries when that happens.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localredis: find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitProcState polls /proc until ok(state) or the process exits, for up to a
// second; without /proc it returns at once.
func waitProcState(p *process, ok func(byte) bool) {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && !p.exited() {
		s, known := procState(p.pid)
		if !known || ok(s) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// readTail returns the last few KB written to path after offset.
func readTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size()-offset > logTailBytes {
		offset = st.Size() - logTailBytes
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "(log: " + err.Error() + ")"
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		return "(log is empty)"
	}
	return string(b)
}

// markBirth marks the node's data as complete from now on (package
// databirth): it was just started, empty or reloaded, and whatever it lost
// it lost before this moment, so restart awareness counts its sit-out from
// here rather than from the first client that meets it. A replica refuses
// the write (read-only); its master's marker reaches it by replication.
func (n *Node) markBirth(ctx context.Context, addr string) {
	call, done, err := session(ctx, addr, n.c.opts.Password)
	if err != nil {
		return
	}
	defer done()
	if _, err := call("EVAL", databirth.Script, "1", databirth.Key); err != nil {
		n.c.log.Debug("localredis: data birth not marked", "node", n.index, "err", err)
	}
}
