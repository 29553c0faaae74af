package workshop_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"flashsale/handlers"
	"flashsale/internal/testsupport"
	"flashsale/loadtest"
	"flashsale/loadtest/workshop"
)

// The runner is also what the server's sequence routes expect.
var _ handlers.WorkshopSequencer = (*workshop.Runner)(nil)

// TestMain removes the storefront binary the sequence test built.
func TestMain(m *testing.M) { os.Exit(testsupport.Main(m)) }

// Every step of the sequence is a cell of the matrix that promises an
// outcome, named once.
func TestSequenceIsCellsOfTheMatrix(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range workshop.Sequence {
		exp, ok := loadtest.Expected(s.Variant, s.Scenario)
		if !ok || (exp != loadtest.Holds && exp != loadtest.Breaks) {
			t.Errorf("%s: expected %q (in the matrix: %v); a step must hold or break", s.ID(), exp, ok)
		}
		if seen[s.ID()] {
			t.Errorf("%s is in the sequence twice", s.ID())
		}
		seen[s.ID()] = true
		if s.Rate < 1 || s.DurationMS < 500 {
			t.Errorf("%s: %d req/s for %d ms", s.ID(), s.Rate, s.DurationMS)
		}
	}
}

// Only steps of the sequence can be picked, and nothing starts before the
// instance listens.
func TestSequenceRefusesUnknownSteps(t *testing.T) {
	w := workshop.NewRunner("token", nil, time.Second, nil)
	w.SetBase("http://127.0.0.1:1")
	if _, started, err := w.StartSequence([]string{"lua/meteor"}); started || !errors.Is(err, workshop.ErrInvalidRun) {
		t.Errorf("an unknown step: started %v, err %v; want ErrInvalidRun", started, err)
	}
	if runs := w.Runs(); len(runs) != 0 {
		t.Errorf("runs %v, want none", runs)
	}
	// An instance that did not start its own nodes says so, and which steps
	// it will skip.
	var plan struct {
		Nodes bool       `json:"node_scenarios"`
		Why   string     `json:"why_no_nodes"`
		Steps []pageStep `json:"steps"`
	}
	asJSON(t, w.SequencePlan(), &plan)
	if plan.Nodes || plan.Why == "" || len(plan.Steps) != len(workshop.Sequence) {
		t.Errorf("plan without nodes of its own: %+v", plan)
	}
	for _, st := range plan.Steps {
		if want := st.Scenario == loadtest.NodeDown || strings.HasPrefix(st.Scenario, loadtest.NodeRestart); st.Nodes != want {
			t.Errorf("%s/%s: needs nodes %v, want %v", st.Variant, st.Scenario, st.Nodes, want)
		}
	}
}

// A short sequence (a rung that breaks, the one that fixes it, and a node
// scenario) runs for real in the runner's own environment, one cell at a
// time, and reports each cell's outcome beside the expected one.
func TestSequenceRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a load test")
	}
	testsupport.Need(t, "redis-server", "start the sequence's Redis nodes")
	w := workshop.NewRunner("token", nil, 500*time.Millisecond, nil)
	w.SetBase("http://127.0.0.1:1") // its own environment: this instance is not attacked
	w.UseOwnEnvironment(testsupport.Binary(t, "."))
	only := []string{"none/clean", "lua/clean", "redlock/node-down"}
	id, started, err := w.StartSequence(only)
	if err != nil || !started {
		t.Fatalf("start: %v, started %v", err, started)
	}
	if _, again, _ := w.StartSequence(nil); again {
		t.Fatal("a second sequence started while the first runs")
	}

	// Follow the events as the page reads them (JSON): one step event as
	// each cell starts and one as it ends, then the result.
	var order []string
	deadline := time.After(4 * time.Minute)
	for next := 0; ; {
		evs, changed, over := w.Events(id, next)
		next += len(evs)
		for _, e := range evs {
			var ev struct {
				Type string   `json:"type"`
				Step pageStep `json:"step"`
			}
			asJSON(t, e, &ev)
			if ev.Type == "step" && ev.Step.State == "done" {
				order = append(order, ev.Step.Variant+"/"+ev.Step.Scenario)
			}
		}
		if over {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the sequence did not end in 4 minutes")
		}
	}
	if !slices.Equal(order, only) {
		t.Errorf("cells done in the order %v, want %v", order, only)
	}
	rec, _ := w.Run(id)
	var r struct {
		State string     `json:"state"`
		Kind  string     `json:"kind"`
		Steps []pageStep `json:"steps"`
	}
	asJSON(t, rec, &r)
	if r.State != "done" || r.Kind != "sequence" || len(r.Steps) != len(only) {
		t.Fatalf("record %+v", r)
	}
	for _, st := range r.Steps {
		id := st.Variant + "/" + st.Scenario
		if st.Cell == nil {
			t.Errorf("%s: %s, no cell (%s)", id, st.State, st.Error)
			continue
		}
		if st.Cell.Expected != st.Expected || st.Cell.Seen != st.Expected || !st.Cell.OK {
			t.Errorf("%s: expected %s; the cell expected %s and saw %s (ok %v): %v", id, st.Expected, st.Cell.Expected, st.Cell.Seen, st.Cell.OK, st.Cell.Reasons)
		}
	}
}

// pageStep is a step as the page reads it.
type pageStep struct {
	Variant  string `json:"variant"`
	Scenario string `json:"scenario"`
	Expected string `json:"expected"`
	State    string `json:"state"`
	Error    string `json:"error"`
	Nodes    bool   `json:"nodes"`
	Cell     *struct {
		Expected string   `json:"expected"`
		Seen     string   `json:"seen"`
		OK       bool     `json:"ok"`
		Reasons  []string `json:"reasons"`
	} `json:"cell"`
}

// asJSON decodes v's JSON encoding into out.
func asJSON(t *testing.T, v, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}
