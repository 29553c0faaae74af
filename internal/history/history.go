// Package history is the line format of a chaos run's records and the
// appender an app process writes its own with.
//
// Three kinds of file share the format, one JSON object a line: each
// storefront process's history of its leases and store writes (written
// here, by Recorder), the load client's record of the answers it got, and
// the nemesis's log of the faults it caused. The checker
// (loadtest/checker) reads all three with the same Record, so a field
// renamed on one side cannot silently blind it; the format is all it
// shares with the app.
//
// Every lease is recorded as its holder saw it: when it was acquired, until
// when the holder believed it exclusive, its fencing token, and when it was
// released or lost. Every committed store write is recorded with the owner
// value of the lease it was made under, which ties it to that lease's key,
// variant and token. Each line is one write(2) to a file opened O_APPEND,
// so a process killed with SIGKILL loses no line it had finished, and
// several processes can share one file.
//
// This package knows nothing of the lock or the store: the command turns
// the lock's events into records (history.go at the top of the module) and
// the store's changes arrive as Change values.
package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Record is one line of a history, client or nemesis file.
type Record struct {
	// Time is when the process recorded the line (the event's own time).
	Time time.Time `json:"t"`
	// Kind is "lease" or "write" (an app's history), "ack" (the client's
	// record of an answer) or "nemesis" (a fault).
	Kind string `json:"kind"`
	// Proc names the app process: "pid:<n>".
	Proc string `json:"proc,omitempty"`
	// Op is a lease's "acquired", "released" or "lost"; a write's "stock"
	// or "seat"; an ack's "order" or "seat"; a fault's "start", "end" or
	// "instant".
	Op string `json:"op"`
	// Variant and Key are the lock variant and lock name of a lease (an
	// ack names its variant too).
	Variant string `json:"variant,omitempty"`
	Key     string `json:"key,omitempty"`
	// Owner is the lease's random owner value; a write carries the owner
	// of the lease it was made under.
	Owner string `json:"owner,omitempty"`
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
	// Status and IdempotencyKey are an ack: the HTTP status the client
	// got (0 for none) for the request it sent with that key.
	Status         int    `json:"status,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Fault, Target and Detail name a nemesis event ("app-pause",
	// "app 1").
	Fault  string `json:"fault,omitempty"`
	Target string `json:"target,omitempty"`
	Detail string `json:"detail,omitempty"`
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
