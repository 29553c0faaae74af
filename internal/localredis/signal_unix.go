//go:build unix

package localredis

import (
	"os"
	"syscall"
)

var (
	sigTerm os.Signal = syscall.SIGTERM
	sigStop os.Signal = syscall.SIGSTOP
	sigCont os.Signal = syscall.SIGCONT
)
