package opfuzz

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// holderProc is one running holder process, as its parent sees it.
type holderProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
	reader *holderReader
	read   chan error // the stdout reader's end
}

// startHolder starts a holder process with cmd (which runs HolderMain with
// h's arguments) and waits until its first try is over, at most within.
// log, if set, gets the holder's stderr as well.
func startHolder(cmd *exec.Cmd, log io.Writer, within time.Duration) (*holderProc, error) {
	p := &holderProc{cmd: cmd, stderr: &bytes.Buffer{}, reader: newHolderReader(), read: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if log != nil {
		cmd.Stderr = io.MultiWriter(p.stderr, log)
	}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a holder: %w", err)
	}
	go func() { p.read <- p.reader.read(out, cmd.Process.Pid) }()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.reader.ready:
		return p, nil
	case <-t.C:
		return p, fmt.Errorf("holder %d made no first try within %v", cmd.Process.Pid, within)
	}
}

// stop closes the holder's stdin (it releases what it holds and exits),
// kills it by its PID if it has not exited within grace, and waits for it.
func (p *holderProc) stop(grace time.Duration) error {
	_ = p.stdin.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	var readErr error
	select {
	case readErr = <-p.read:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		readErr = <-p.read
	}
	waitErr := p.cmd.Wait()
	if waitErr != nil && p.stderr.Len() > 0 {
		waitErr = fmt.Errorf("holder %d: %w: %s", p.cmd.Process.Pid, waitErr, strings.TrimSpace(p.stderr.String()))
	}
	if readErr != nil {
		return readErr
	}
	return waitErr
}

// kill ends the holder at once, by its PID.
func (p *holderProc) kill() { _ = p.cmd.Process.Kill() }

// HolderCommand is the Config.Holder of a program that runs HolderMain when
// started as exe with args first (the command re-running itself as
// "exe holder …"), with env added to its environment.
func HolderCommand(exe string, first []string, password string, env ...string) func(args []string) *exec.Cmd {
	return func(args []string) *exec.Cmd {
		cmd := exec.Command(exe, append(slices.Clone(first), args...)...)
		cmd.Env = append(append(os.Environ(), env...), PasswordEnv+"="+password)
		return cmd
	}
}
