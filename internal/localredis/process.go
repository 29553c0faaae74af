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
	"time"

	"flashsale/internal/databirth"
	"flashsale/internal/redisacl"
)

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
	if err := n.writeACL(); err != nil {
		return err
	}
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

// writeACL writes the cluster's ACL file into the node's directory, when it
// runs the ACL: at every start, since a restart without data wipes the
// directory. Only this OS user may read it (it holds the passwords).
func (n *Node) writeACL() error {
	if !n.c.ACL() {
		return nil
	}
	rules, err := redisacl.File(n.c.appPassword, n.c.adminPassword)
	if err != nil {
		return fmt.Errorf("localredis: node %d: %w", n.index, err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, aclName), rules, 0o600); err != nil {
		return fmt.Errorf("localredis: node %d: %w", n.index, err)
	}
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
		last := probe(ctx, addr, n.c.admin(), p.pid)
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
	call, done, err := session(ctx, addr, n.c.admin())
	if err != nil {
		return
	}
	defer done()
	if _, err := call("EVAL", databirth.Script, "1", databirth.Key); err != nil {
		n.c.log.Debug("localredis: data birth not marked", "node", n.index, "err", err)
	}
}
