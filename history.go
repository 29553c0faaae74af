package main

import (
	"flashsale/internal/history"
	"flashsale/internal/locktap"
)

// leaseRecord is the history line of a lock event: a lease acquired,
// released or lost, as its holder saw it. Other events (busy, unavailable,
// faults) carry no lease and are not history. It lives with the wiring so
// that the history package, below the lock, never imports it.
func leaseRecord(e locktap.Event) (history.Record, bool) {
	if e.Lease == nil {
		return history.Record{}, false
	}
	var op string
	switch e.Kind {
	case locktap.Acquired:
		op = "acquired"
	case locktap.Released:
		op = "released"
	case locktap.Lost:
		op = "lost"
	default:
		return history.Record{}, false
	}
	l := e.Lease
	token, fenced := l.Token()
	acquired, valid := l.Acquired(), l.ValidUntil()
	rec := history.Record{
		Time: e.Time, Kind: "lease", Op: op, Variant: e.Variant, Key: l.Key(), Owner: l.Owner(),
		Token: token, Fenced: fenced, Acquired: &acquired, ValidUntil: &valid,
	}
	if e.Err != nil {
		rec.Err = e.Err.Error()
	}
	return rec, true
}

// recordLease writes e's lease to h, if e is about a lease; a nil h
// records nothing.
func recordLease(h *history.Recorder, e locktap.Event) {
	if rec, ok := leaseRecord(e); ok {
		h.Write(rec)
	}
}
