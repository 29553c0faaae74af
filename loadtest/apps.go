package loadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
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
