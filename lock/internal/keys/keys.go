// Package keys is the one layout of the Redis keys a lock name maps to,
// under a namespace: the lock itself, its fencing counter and its waiting
// line. Everything that writes, scans or derives these keys uses it.
package keys

import "strings"

// Lock is the key of the lock named name: "<ns>lock:<name>".
func Lock(ns, name string) string { return ns + "lock:" + name }

// Fence is the fencing counter of the lock named name: "<ns>fence:<name>".
func Fence(ns, name string) string { return ns + "fence:" + name }

// Line is the waiting line of the lock named name: "<ns>line:<name>".
func Line(ns, name string) string { return ns + "line:" + name }

// Locks matches every lock key of ns, for SCAN.
func Locks(ns string) string { return Lock(ns, "*") }

// Fences matches every fencing counter of ns, for SCAN.
func Fences(ns string) string { return Fence(ns, "*") }

// Name is the lock name of lockKey, a key Lock made with ns.
func Name(ns, lockKey string) string { return strings.TrimPrefix(lockKey, Lock(ns, "")) }
