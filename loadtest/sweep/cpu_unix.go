//go:build unix

package sweep

import (
	"syscall"
	"time"
)

// ownCPU is the CPU time this process has used, user and system.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
