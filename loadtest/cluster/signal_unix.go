//go:build unix

package cluster

import (
	"os"
	"syscall"
)

// sigTerm asks an app instance to shut down gracefully.
var sigTerm os.Signal = syscall.SIGTERM

// sigStop and sigCont freeze and thaw a whole process: a real
// stop-the-world pause, for the chaos runner's app pauses.
var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT
