// Package loadtest is flashsale's load runner: it drives the storefront with
// vegeta (github.com/tsenart/vegeta/v12/lib) over a matrix of lock variants ×
// fault scenarios and judges every cell against the expected outcomes
// declared in the curriculum (curriculum/table.go).
//
// It is written for a reader who does not trust the app. Every figure in its
// report comes from two places only: the database audit (GET /api/audit) and
// vegeta's own record of what it sent and what came back. The audit is then
// cross-checked against vegeta: the distinct Idempotency-Keys that got a 201
// must equal the orders in the database, and their quantities the units the
// database says were sold. The runner also scans every Redis node itself for
// lock keys without a TTL. Whether a cell "breaks" is decided from those
// numbers alone, never from the name of the variant.
//
// The runner talks to the storefront over HTTP only, through the public
// contract of docs/api.md: the admin API to reset the sale and set faults, the
// order and seat routes under attack, and the audit.
//
// Vegeta v12.12.0 has sharp edges this package works around, each at the
// place it matters: an Attacker cannot be reused once an attack ends (one per
// cell); a Targeter error stops the whole attack (ours never fails, and the
// request cap lives in the pacer instead); PacerFunc lacks Rate and so is not
// a Pacer (the capped pacer is its own type); bodies are read whole unless
// MaxBody is set (it is); a zero rate with default workers is unbounded (the
// rate must be positive and workers are capped).
//
// By default the runner starts what it attacks (cluster.StartLocal): real
// redis-server nodes, reached through toxiproxy proxies, and three
// storefront processes on one SQLite file; it stops them, by PID, when done.
// The scenarios and their faults are in matrix.go; the expected outcomes are
// the curriculum's (curriculum/table.go), read in expected.go; one cell's steps are in
// cell.go; what happens to the Redis nodes during an attack is package
// cluster's. The sweep and the chaos run are
// packages of their own (sweep, chaos) on the same parts: storefront (the
// HTTP client), traffic (what is sent and the tally) and output.
package loadtest
