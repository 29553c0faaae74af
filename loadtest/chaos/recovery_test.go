package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/loadtest/output"
)

// The recovery probe on a real node, as the chaos report carries it: after
// a CLIENT KILL, which loses no key, the node votes again at once; after a
// FLUSHALL (no undo) and an eviction (undone), whose data may have lost
// keys, it sits out first — more than half a TTL, within the promise; a
// probe stopped before any grant reports null, over the promise.
func TestRecoveryProbeOnARealNode(t *testing.T) {
	const ttl = 500 * time.Millisecond
	url := testsupport.Redis(t, 1).URLs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := newRecoveries(ctx, ttl)
	for _, action := range []string{"CLIENT KILL", "FLUSHALL", "eviction"} {
		e := NemesisEvent{Kind: NodeOperator, Nodes: []int{1}, Action: action}
		undo, _, err := operate(ctx, url, action)
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		done := time.Now()
		var undone *time.Time
		if undo != nil {
			if err := undo(ctx); err != nil {
				t.Fatalf("undo %s: %v", action, err)
			}
			at := time.Now()
			undone = &at
		}
		rec.probe(e, url, done, undone, nil)
		rec.wait() // one at a time: a probe after a flush must not meet the next action
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	never := newRecoveries(stopped, ttl)
	never.probe(NemesisEvent{Kind: NodeOperator, Nodes: []int{1}, Action: "FLUSHDB"}, url, time.Now(), nil, nil)
	recs := append(rec.wait(), never.wait()...)

	var buf bytes.Buffer
	if err := output.JSON(&buf, &Report{LockTTL: ttl.String(), OperatorRecovery: recs, RecoverySummary: summarize(recs, ttl)}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Recovery []struct {
			Action      string     `json:"action"`
			Undone      *time.Time `json:"undone"`
			After       *int64     `json:"recovered_after_ms"`
			OverPromise bool       `json:"over_promise"`
			Error       string     `json:"error"`
		} `json:"operator_recovery"`
		Summary struct {
			PromiseMS int64 `json:"promise_ms"`
			ByAction  []struct {
				Action string `json:"action"`
				Count  int    `json:"count"`
				Median *int64 `json:"median_ms"`
				Never  int    `json:"never"`
			} `json:"by_action"`
		} `json:"operator_recovery_summary"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", buf.Bytes())
	if len(got.Recovery) != 4 || got.Summary.PromiseMS != (ttl+recoverySlack).Milliseconds() {
		t.Fatalf("the report has %d recoveries, promise %d ms", len(got.Recovery), got.Summary.PromiseMS)
	}
	for _, r := range got.Recovery {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Action, r.Error)
			continue
		}
		if (r.Undone != nil) != (r.Action == "eviction") {
			t.Errorf("%s: undone %v", r.Action, r.Undone)
		}
		switch r.Action {
		case "CLIENT KILL":
			if r.After == nil || *r.After > (ttl/2).Milliseconds() || r.OverPromise {
				t.Errorf("CLIENT KILL loses no key, yet the node voted again after %s", ms(r.After))
			}
		case "FLUSHALL", "eviction":
			if r.After == nil || *r.After <= (ttl/2).Milliseconds() || *r.After > got.Summary.PromiseMS || r.OverPromise {
				t.Errorf("%s: the node voted again after %s, want a sit-out of about the TTL %v, within %d ms", r.Action, ms(r.After), ttl, got.Summary.PromiseMS)
			}
		case "FLUSHDB":
			if r.After != nil || !r.OverPromise {
				t.Errorf("a probe stopped at once reported a recovery after %s", ms(r.After))
			}
		}
	}
	if n := len(got.Summary.ByAction); n != 4 {
		t.Fatalf("%d actions summed up, want 4", n)
	}
	for _, a := range got.Summary.ByAction {
		if a.Count != 1 || (a.Median == nil) != (a.Action == "FLUSHDB") || a.Never != map[bool]int{true: 1}[a.Action == "FLUSHDB"] {
			t.Errorf("summary of %s: %d faults, median %s, %d never", a.Action, a.Count, ms(a.Median), a.Never)
		}
	}
}
