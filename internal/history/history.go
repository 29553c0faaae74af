// Package history records what one storefront process saw of its locks and
// its store writes, as JSON lines, for a checker that shares no code with
// the app (loadtest/checker) to read after a chaos run.
//
// Every lease is recorded as its holder saw it: when it was acquired, until
// when the holder believed it exclusive, its fencing token, and when it was
// released or lost. Every committed store write is recorded with the owner
// value of the lease it was made under, which ties it to that lease's key,
// variant and token. Each line is one write(2) to a file opened O_APPEND,
// so a process killed with SIGKILL loses no line it had finished, and
// several processes can share one file.
//
// The line format is the contract with the checker; docs/chaos.md lists
// the fields.
package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"flashsale/lock"
)

// Record is one line of the history.
type Record struct {
	// Time is when the process recorded the line (the event's own time).
	Time time.Time `json:"t"`
	// Kind is "lease" or "write".
	Kind string `json:"kind"`
	// Proc names the process: "pid:<n>".
	Proc string `json:"proc"`
	// Op is, for a lease, "acquired", "released" or "lost"; for a write,
	// "stock" or "seat".
	Op string `json:"op"`
	// Variant and Key are the lock variant and lock name of a lease.
	Variant string `json:"variant,omitempty"`
	Key     string `json:"key,omitempty"`
	// Owner is the lease's random owner value; a write carries the owner
	// of the lease it was made under.
	Owner string `json:"owner"`
	// Token and Fenced are the lease's fencing token and whether the
	// variant issues tokens at all.
	Token  uint64 `json:"token,omitempty"`
	Fenced bool   `json:"fenced,omitempty"`
	// Acquired and ValidUntil are the holder's view of its lease: granted
	// then, believed exclusive until then.
	Acquired   *time.Time `json:"acquired,omitempty"`
	ValidUntil *time.Time `json:"valid_until,omitempty"`
	// Err is why a release or a watchdog failed.
	Err string `json:"err,omitempty"`
	// SKU and Stock are a stock write: the stock the holder wrote.
	SKU   string `json:"sku,omitempty"`
	Stock *int64 `json:"stock,omitempty"`
	// Event, Seat and User are a booking.
	Event string `json:"event,omitempty"`
	Seat  string `json:"seat,omitempty"`
	User  string `json:"user,omitempty"`
}

// Recorder appends records to one file. Its methods are safe for concurrent
// use and never block for longer than one write to a local file.
type Recorder struct {
	proc string
	mu   sync.Mutex
	f    *os.File
	err  error
}

// Open opens (creating, appending to) the history file at path.
func Open(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Recorder{proc: fmt.Sprintf("pid:%d", os.Getpid()), f: f}, nil
}

// Write appends one record, stamping the process; the first error is kept
// for Close and later records are dropped.
func (r *Recorder) Write(rec Record) {
	if r == nil {
		return
	}
	rec.Proc = r.proc
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	b, err := json.Marshal(rec)
	if err != nil {
		r.fail(fmt.Errorf("history: encode: %w", err))
		return
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	if _, err := r.f.Write(b); err != nil {
		r.err = fmt.Errorf("history: write: %w", err)
	}
}

func (r *Recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// Lock records a lock event: a lease acquired, released or lost. Other
// events (busy, unavailable, faults) carry no lease and are not history.
func (r *Recorder) Lock(e lock.Event) {
	if r == nil || e.Lease == nil {
		return
	}
	var op string
	switch e.Kind {
	case lock.Acquired:
		op = "acquired"
	case lock.Released:
		op = "released"
	case lock.Lost:
		op = "lost"
	default:
		return
	}
	l := e.Lease
	token, fenced := l.Token()
	acquired, valid := l.Acquired(), l.ValidUntil()
	rec := Record{
		Time: e.Time, Kind: "lease", Op: op, Variant: l.Variant(), Key: l.Key(), Owner: l.Owner(),
		Token: token, Fenced: fenced, Acquired: &acquired, ValidUntil: &valid,
	}
	if e.Err != nil {
		rec.Err = e.Err.Error()
	}
	r.Write(rec)
}

// Change is a committed store write as the store reports it (its fields
// are those of the inventory's change, so one converts to the other; this
// package names them itself and imports nothing of the store).
type Change struct {
	Type  string // "stock", "seat" or "reset"
	SKU   string
	Stock *int64
	Event string
	Seat  string
	User  string
	Owner string // the owner value of the lease the write was made under
}

// Change records a committed store write; a reset is not a write under a
// lease and is skipped.
func (r *Recorder) Change(c Change) {
	if r == nil || c.Owner == "" {
		return
	}
	r.Write(Record{
		Kind: "write", Op: c.Type, Owner: c.Owner,
		SKU: c.SKU, Stock: c.Stock, Event: c.Event, Seat: c.Seat, User: c.User,
	})
}

// Close closes the file and returns the first error met while recording.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.err, r.f.Close())
}
