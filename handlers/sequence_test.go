package handlers_test

import (
	"flashsale/internal/testsupport"
	"fmt"
	"slices"
	"testing"

	"flashsale/handlers"
)

// stubSequencer is a workshop runner with a sequence of two steps; a start
// is refused while busy, and a step it does not have is invalid.
type stubSequencer struct {
	stubRunner
	busy bool
}

// stubInvalid is the stub's refusal of a request, marked as a runner marks
// one.
type stubInvalid struct{}

func (stubInvalid) Error() string { return "invalid workshop run" }
func (stubInvalid) InvalidRun()   {}

func (stubSequencer) SequencePlan() any {
	return map[string]any{"steps": []string{"none/clean", "lua/clean"}, "node_scenarios": false, "why_no_nodes": "given -redis"}
}

func (s stubSequencer) StartSequence(only []string) (string, bool, error) {
	for _, o := range only {
		if !slices.Contains([]string{"none/clean", "lua/clean"}, o) {
			return "", false, fmt.Errorf("%w: %q", stubInvalid{}, o)
		}
	}
	return "s1", !s.busy, nil
}

// The sequence routes are admin routes: the plan, a start (202 with the
// run's id), a step the sequence lacks (422), a start while a run is in
// progress (409), and a runner without a sequence.
func TestWorkshopSequenceRoutes(t *testing.T) {
	testsupport.Long(t, "waits out limits, deadlines and streams for seconds")
	idle := newApp(t, appOpts{config: func(c *handlers.Config) { c.Workshop = stubSequencer{stubRunner: stubRunner{}} }})
	busy := newApp(t, appOpts{config: func(c *handlers.Config) { c.Workshop = stubSequencer{busy: true} }})
	plain := newApp(t, appOpts{config: func(c *handlers.Config) { c.Workshop = stubRunner{} }})
	const path = "/api/admin/workshop/sequence"
	cases := []struct {
		name   string
		a      *app
		method string
		body   any
		hdr    []string
		status int
		code   string
	}{
		{"plan without the token", idle, "GET", nil, nil, 401, "unauthorized"},
		{"start without the token", idle, "POST", nil, nil, 401, "unauthorized"},
		{"plan", idle, "GET", nil, admin, 200, ""},
		{"the whole sequence", idle, "POST", nil, admin, 202, ""},
		{"two of its steps", idle, "POST", map[string]any{"only": []string{"lua/clean", "none/clean"}}, admin, 202, ""},
		{"a step it lacks", idle, "POST", map[string]any{"only": []string{"lua/meteor"}}, admin, 422, "invalid_run"},
		{"an empty only", idle, "POST", map[string]any{"only": []string{}}, admin, 400, "bad_json"},
		{"only null", idle, "POST", `{"only":null}`, admin, 202, ""},
		{"an unknown field", idle, "POST", map[string]any{"steps": 2}, admin, 400, ""},
		{"while a run is in progress", busy, "POST", nil, admin, 409, "run_in_progress"},
		{"a runner without a sequence", plain, "POST", nil, admin, 500, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.a.call(tc.method, path, tc.body, tc.hdr...)
			if r.status != tc.status || (tc.code != "" && r.code() != tc.code) {
				t.Errorf("%s %s: %d %s, want %d %s", tc.method, path, r.status, r.body, tc.status, tc.code)
			}
			if tc.status == 202 {
				var got struct{ ID string }
				r.decode(t, &got)
				if got.ID != "s1" {
					t.Errorf("id %q, want s1", got.ID)
				}
			}
		})
	}
}
