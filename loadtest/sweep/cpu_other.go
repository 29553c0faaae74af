//go:build !unix

package sweep

import "time"

// ownCPU is unknown here: the steps report no cores.
func ownCPU() time.Duration { return 0 }
