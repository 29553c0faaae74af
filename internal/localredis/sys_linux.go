//go:build linux

package localredis

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr makes the kernel SIGKILL a node when the thread that forked it
// dies, so a crashed test binary does not leave redis-servers behind. Pdeathsig
// is tied to the forking OS thread, not the process; the Go runtime keeps its
// threads alive, so in practice this means "when the parent process dies".
//
// A node also gets a process group of its own, so a terminal's Ctrl-C (sent
// to the whole foreground group) reaches only its parent, which then stops
// its nodes in order; hit by the signal too, the nodes would exit first and
// be restarted by a supervisor that does not know shutdown has begun.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// procState returns the state letter from /proc/<pid>/stat ('T' = stopped),
// so Pause and Resume can return only once the signal has taken effect.
func procState(pid int) (byte, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may contain spaces and parentheses; the state follows
	// the last ") ".
	i := bytes.LastIndex(b, []byte(") "))
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	return b[i+2], true
}
