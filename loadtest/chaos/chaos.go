// Package chaos is the load runner's chaos run: every selected variant sells
// side by side on its own SKUs and seats while a seeded nemesis crashes,
// wipes, pauses and partitions the Redis nodes, the app processes and the
// network between them; the checker then judges each variant from the
// recorded histories and the database.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"flashsale/internal/history"
	"flashsale/loadtest"
	"flashsale/loadtest/checker"
	"flashsale/loadtest/linear"
)

// Report is the outcome of a chaos run: chaos.json.
type Report struct {
	Seed      uint64              `json:"seed"`
	Duration  string              `json:"duration"`
	Faults    []string            `json:"faults"`
	Instances int                 `json:"instances"`
	Nodes     int                 `json:"nodes"`
	LockTTL   string              `json:"lock_ttl"`
	Variants  map[string]*Variant `json:"variants"`
	Schedule  []NemesisEvent      `json:"schedule"`
	Nemesis   []NemesisRecord     `json:"nemesis"`
	// OperatorRecovery is, for every node-operator fault, how long after
	// the action ended a new client's lock over that node alone was
	// granted: when the node voted again. RecoverySummary sums it up per
	// action, against the design's promise.
	OperatorRecovery []OperatorRecovery `json:"operator_recovery,omitempty"`
	RecoverySummary  *RecoverySummary   `json:"operator_recovery_summary,omitempty"`
	Command          string             `json:"command,omitempty"`
	Started          time.Time          `json:"started"`
	// RunStart is when the clients and the nemesis began: the timeline's 0.
	RunStart time.Time `json:"run_start"`
	Finished time.Time `json:"finished"`
	Notes    []string  `json:"notes,omitempty"`
	// StuckLockKeys are the lock keys the runner found without a TTL.
	StuckLockKeys []string                  `json:"stuck_lock_keys,omitempty"`
	holders       map[string][]checker.Span // per variant, its hot key's leases
	order         []string
}

// Variant is one variant's verdict.
type Variant struct {
	Verdict  string           `json:"verdict"`
	Expected loadtest.Outcome `json:"expected"`
	// ExpectedBreakers are the run's fault kinds that can break it.
	ExpectedBreakers []string `json:"expected_breakers,omitempty"`
	OK               bool     `json:"ok"`
	// Counts are what the checker found, as its result has them.
	checker.Counts
	// NemesisEvents counts the faults of the run, by kind: every variant
	// met all of them.
	NemesisEvents map[string]int `json:"nemesis_events"`
	// Requests and Answers are the client's side: answers by status, 0
	// for none.
	Requests int            `json:"requests"`
	Answers  map[string]int `json:"answers"`
	// Leases, Orders and Bookings are how much the verdict rests on.
	Leases         int                 `json:"leases"`
	Orders         int64               `json:"orders"`
	Bookings       int64               `json:"bookings"`
	FirstViolation *checker.Violation  `json:"first_violation,omitempty"`
	Violations     []checker.Violation `json:"violations,omitempty"`
	Scope          checker.Scope       `json:"scope"`
	// Linearizable is porcupine's verdict on the history the variant's
	// shoppers saw: null when its check ran out of time. Linear has its
	// sizes and time; HistoryFile is its picture (relative to the run's
	// directory) when it is not linearizable; Disagreement says how it
	// and the checker's data disagree, "" when they agree.
	Linearizable *bool           `json:"linearizable"`
	Linear       *linear.Verdict `json:"linearizability,omitempty"`
	HistoryFile  string          `json:"history_file,omitempty"`
	Disagreement string          `json:"disagreement,omitempty"`
	// DisagreementDeclared is why the curriculum lets porcupine and the
	// data disagree for the rung, when it does.
	DisagreementDeclared string `json:"disagreement_declared,omitempty"`
	// Unanswered counts the requests the client gave up waiting for (a
	// hang, never a fault's doing: a crashed instance refuses at once),
	// and names the first of them.
	Unanswered      int                   `json:"unanswered"`
	UnansweredNamed []loadtest.Unanswered `json:"unanswered_requests,omitempty"`
}

// Failed reports whether a variant that must hold broke, a request went
// unanswered, porcupine and the checker's data disagree as
// loadtest.DisagreementFails fails them (the load runner's rule), or, with
// strict, a variant expected to break held.
func (r *Report) Failed(strict bool) bool {
	for name, v := range r.Variants {
		if !v.OK && (v.Expected == loadtest.Holds || strict) || v.Unanswered > 0 ||
			v.Disagreement != "" && loadtest.DisagreementFails(name, v.Expected, strict) {
			return true
		}
	}
	return false
}

// judge runs the checker on a run's directory — the instances' histories,
// the client's and the nemesis's logs, the database — and fills in every
// variant's verdict.
func (r *Report) judge(ctx context.Context, dir string) error {
	histories, err := filepath.Glob(filepath.Join(dir, "env", "history-app*.jsonl"))
	if err != nil {
		return err
	}
	recs, err := history.ReadFiles(append(histories, filepath.Join(dir, "client.jsonl"), filepath.Join(dir, "nemesis.jsonl"))...)
	if err != nil {
		return err
	}
	db, err := checker.OpenSQLite(filepath.Join(dir, "env", "sale.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	var in []checker.Scope
	for _, v := range r.order {
		in = append(in, r.Variants[v].Scope)
	}
	results, err := checker.Check(ctx, checker.Input{Records: recs, DB: db, Scopes: in, StuckLockKeys: r.StuckLockKeys})
	if err != nil {
		return err
	}
	r.holders = map[string][]checker.Span{}
	for _, res := range results {
		cv := r.Variants[res.Variant]
		cv.Verdict = res.Verdict
		cv.Counts, cv.Leases, cv.Orders, cv.Bookings = res.Counts, res.Leases, res.Orders, res.Bookings
		cv.FirstViolation, cv.Violations = res.FirstViolation, res.Violations
		cv.OK = cv.Expected == loadtest.NoClaim || string(cv.Expected) == res.Verdict
		r.holders[res.Variant] = checker.Holders(recs, res.Variant, "sku:"+cv.Scope.SKUs[0])
	}
	return nil
}

// Recheck judges a kept chaos run again from its directory (its
// chaos.json, histories and database), with the checker as it is now, and
// has porcupine check the history every variant's shoppers saw again.
func Recheck(ctx context.Context, dir string) (*Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, "chaos.json"))
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	for _, v := range loadtest.Variants {
		if r.Variants[v] != nil {
			r.order = append(r.order, v)
		}
	}
	if err := r.judge(ctx, dir); err != nil {
		return nil, err
	}
	hs := map[string]*linear.History{}
	for name := range r.Variants {
		h, err := linear.ReadFile(historyFile(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s: porcupine's history: %w", name, err)
		}
		hs[name] = h
	}
	r.Notes = slices.DeleteFunc(r.Notes, func(n string) bool { return strings.Contains(n, historyNote) })
	r.checkHistories(hs, dir)
	return &r, nil
}
