//go:build !linux

package cluster

import "syscall"

// sysProcAttr: parent-death signals exist only on Linux; elsewhere the
// instances of a crashed runner must be stopped by hand.
func sysProcAttr() *syscall.SysProcAttr { return nil }
