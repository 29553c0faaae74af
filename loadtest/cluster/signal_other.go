//go:build !unix

package cluster

import "os"

// sigTerm: without SIGTERM an instance can only be killed.
var sigTerm os.Signal = os.Kill

// sigStop and sigCont do not exist here: app pauses fail.
var sigStop, sigCont os.Signal
