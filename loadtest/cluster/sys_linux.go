//go:build linux

package cluster

import "syscall"

// sysProcAttr makes the kernel SIGKILL an app instance when the runner dies,
// so a crashed or killed runner does not leave storefronts behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
