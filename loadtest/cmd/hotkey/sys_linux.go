package main

import "golang.org/x/sys/unix"

// monoNow is CLOCK_MONOTONIC in nanoseconds. It is one clock for every
// process on the machine (Go's own monotonic readings are relative to each
// process's start and cannot be compared across processes), never steps, and
// is read in one call: so sections recorded by different processes compare
// directly, to within the cost of the call.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // CLOCK_MONOTONIC exists on every Linux Go supports
	}
	return ts.Nano()
}
