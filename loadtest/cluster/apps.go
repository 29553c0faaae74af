package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"flashsale/loadtest/storefront"
)

// errNoSignal is returned for a pause where the platform has no SIGSTOP.
var errNoSignal = errors.New("pausing a process needs SIGSTOP and SIGCONT")

// PauseApp freezes instance i with SIGSTOP, a real stop-the-world pause:
// every goroutine of the process stops, its lease watchdogs included, and
// its sockets stay open.
func (l *Local) PauseApp(i int) error {
	if sigStop == nil {
		return errNoSignal
	}
	return l.signalApp(i, sigStop)
}

// ResumeApp thaws instance i with SIGCONT.
func (l *Local) ResumeApp(i int) error {
	if sigCont == nil {
		return errNoSignal
	}
	return l.signalApp(i, sigCont)
}

func (l *Local) signalApp(i int, sig os.Signal) error {
	a, err := l.app(i)
	if err != nil {
		return err
	}
	if err := a.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("app instance %d: %v: %w", i, sig, err)
	}
	return nil
}

// CrashApp kills instance i with SIGKILL, by PID, and waits until it is
// gone: nothing it had in flight finishes, no lease of it is released.
func (l *Local) CrashApp(i int) error {
	a, err := l.app(i)
	if err != nil {
		return err
	}
	if err := a.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("app instance %d: kill: %w", i, err)
	}
	<-a.done
	return nil
}

// RestartApp starts a crashed instance i again, at the same address and
// with the same history file, and waits until it is ready.
func (l *Local) RestartApp(ctx context.Context, i int) error {
	if _, err := l.app(i); err != nil {
		return err
	}
	a, err := l.startApp(ctx, i)
	if err != nil {
		return fmt.Errorf("app instance %d: restart: %w", i, err)
	}
	l.apps[i] = a
	return nil
}

// Running reports whether instance i's process is alive (paused counts).
func (l *Local) Running(i int) bool {
	a, err := l.app(i)
	if err != nil {
		return false
	}
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// PID is instance i's process id.
func (l *Local) PID(i int) int {
	a, err := l.app(i)
	if err != nil {
		return 0
	}
	return a.cmd.Process.Pid
}

func (l *Local) app(i int) (*appProc, error) {
	if i < 0 || i >= len(l.apps) {
		return nil, fmt.Errorf("no app instance %d (have %d)", i, len(l.apps))
	}
	return l.apps[i], nil
}

// appProc is one running storefront process.
type appProc struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
}

// listening finds the address the storefront reports once it listens.
var listening = regexp.MustCompile(`(?i)listening on (https?://[^\s"',]+)`)

// startApp starts one instance with -addr 127.0.0.1:0, learns its port
// from the line it prints when listening, and waits until it is ready.
func startApp(ctx context.Context, bin string, args, env []string, logPath string) (*appProc, error) {
	// Appended, not truncated: instances restarted for another scenario
	// keep the earlier instances' story in the same file.
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	a := &appProc{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		// The scanner owns the log file; it ends when the process's output
		// closes after exit.
		defer logf.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case found <- strings.TrimRight(m[1], "/."):
				default:
				}
			}
		}
		_, _ = io.Copy(logf, pr)
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(a.done)
	}()
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	select {
	case a.base = <-found:
	case <-a.done:
		return nil, fmt.Errorf("exited before listening (%v); log %s:\n%s", cmd.ProcessState, logPath, tail(logPath))
	case <-tctx.Done():
		a.stop()
		return nil, fmt.Errorf("did not say where it listens within 60s; log %s:\n%s", logPath, tail(logPath))
	}
	if err := storefront.Loopback(a.base); err != nil {
		a.stop()
		return nil, err
	}
	api := storefront.API{Base: a.base}
	if err := api.WaitReady(tctx); err != nil {
		a.stop()
		return nil, fmt.Errorf("%w; log %s:\n%s", err, logPath, tail(logPath))
	}
	return a, nil
}

// stop sends SIGTERM to the instance's PID, and SIGKILL if it has not
// exited within 5 s.
func (a *appProc) stop() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(sigTerm)
	select {
	case <-a.done:
	case <-time.After(5 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// appEnv is the runner's environment without FLASHSALE_* variables, so a
// setting in the user's shell cannot change what the command line says.
// Unless the shell sets GOMAXPROCS, each of the instances sharing this
// machine gets its share of the cores, as a replica in a container with a
// CPU limit does (Go reads the limit from the cgroup). Without it each
// instance ran as many threads as the machine has cores: under a spike the
// instances and the runner then fought for every core at once, and each
// step of a lock's hand-off from one instance to the next waited for the
// kernel to schedule one of them (docs/performance.md has the runs).
func appEnv(instances int) []string {
	var env []string
	procs := false
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FLASHSALE_") {
			continue
		}
		procs = procs || strings.HasPrefix(kv, "GOMAXPROCS=")
		env = append(env, kv)
	}
	if !procs {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(max(1, runtime.NumCPU()/max(1, instances))))
	}
	return env
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}

// startApp starts instance i and remembers where it listens, so a restart
// after a crash comes back at the same address.
func (l *Local) startApp(ctx context.Context, i int) (*appProc, error) {
	a, err := startApp(ctx, l.bin, l.args(i), appEnv(l.cfg.Instances), filepath.Join(l.dir, "logs", fmt.Sprintf("app-%d.log", i)))
	if err != nil {
		return nil, err
	}
	for len(l.addrs) <= i {
		l.addrs = append(l.addrs, "127.0.0.1:0")
	}
	l.addrs[i] = strings.TrimPrefix(a.base, "http://")
	return a, nil
}
