//go:build unix

package loadtest

import (
	"os"
	"syscall"
)

// sigTerm asks an app instance to shut down gracefully.
var sigTerm os.Signal = syscall.SIGTERM
