package workshop_test

import (
	"testing"
	"time"

	"flashsale/handlers"
	"flashsale/loadtest"
	"flashsale/loadtest/workshop"
)

// The runner is what the server's workshop routes expect.
var _ handlers.WorkshopRunner = (*workshop.Runner)(nil)

func TestRunnerBeforeTheInstanceListens(t *testing.T) {
	w := workshop.NewRunner("token", nil, time.Second, nil)
	if got, want := len(w.Scenarios()), len(loadtest.ScenarioNames()); got != want {
		t.Errorf("%d scenarios, the load runner has %d", got, want)
	}
	if _, started, err := w.Start("lua", loadtest.Clean, 10, 1, false, true); started || err == nil {
		t.Errorf("a run before SetBase: started %v, err %v; want an error", started, err)
	}
	if runs := w.Runs(); len(runs) != 0 {
		t.Errorf("runs %v, want none", runs)
	}
	if _, ok := w.Run("1"); ok {
		t.Error("run 1 found; none was started")
	}
	if evs, _, over := w.Events("1", 0); len(evs) != 0 || !over {
		t.Errorf("events of an unknown run: %v, over %v; want none, over", evs, over)
	}
}
