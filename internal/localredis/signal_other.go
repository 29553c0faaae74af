//go:build !unix

package localredis

import "os"

// Without job-control signals a real node can only be killed; Pause and
// Resume report errPauseUnsupported and Stop degrades to Kill.
var (
	sigTerm os.Signal = os.Kill
	sigStop os.Signal
	sigCont os.Signal
)
