//go:build !linux

package localredis

import "syscall"

// sysProcAttr: parent-death signals exist only on Linux; elsewhere nodes of a
// crashed parent must be cleaned up by hand.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// procState is unknown without /proc; Pause and Resume then return as soon
// as the signal is sent.
func procState(int) (byte, bool) { return 0, false }
