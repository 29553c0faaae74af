package lock

// WaitingHere reports whether a waiter of this process waits for name
// (the speed layer's waiting room is open), for the tests of package
// lock_test.
func (l *Locker) WaitingHere(name string) bool { return l.wake.waiting(l.keysFor(name).lock) }
