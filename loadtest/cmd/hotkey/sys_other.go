//go:build !linux

package main

import "time"

// monoNow is the wall clock in nanoseconds, the one clock every process
// shares outside Linux. A clock step during a run can hide or invent an
// overlap there; on Linux the tool reads CLOCK_MONOTONIC instead.
func monoNow() int64 { return time.Now().UnixNano() }
