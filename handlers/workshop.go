package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// WorkshopRunner runs load-runner cells for the workshop page, one at a time,
// against this instance. The server only checks requests, starts runs and
// relays what they report; the runner (loadtest/workshop, wired in by main)
// does the work, so this package links neither the load runner nor vegeta.
// Records and events are encoded as JSON as they are.
type WorkshopRunner interface {
	// Scenarios are the fault scenarios a run may name.
	Scenarios() []string
	// Start begins a run and returns its id; started is false, and nothing
	// runs, while another run is in progress. watchdog turns the lease
	// watchdog on for the run (its column may turn it on anyway); fast
	// false runs it with the locks' speed layer off (the taught code).
	Start(variant, scenario string, rate, durationS int, watchdog, fast bool) (id string, started bool, err error)
	// Runs are the records of every run, oldest first.
	Runs() []any
	// Run is the record of one run; ok is false when no run has this id.
	Run(id string) (record any, ok bool)
	// Events are a run's events from the from-th on, a channel closed when
	// the next one comes, and whether the run is over (nothing follows).
	Events(id string, from int) (events []any, next <-chan struct{}, over bool)
}

// invalidRun is how a runner marks a request it refuses as it stands: an
// error with an InvalidRun method anywhere in its chain is answered 422
// invalid_run. A runner says so without importing this package.
type invalidRun interface {
	error
	InvalidRun()
}

// errNoWorkshop answers a run on a server built without a runner.
var errNoWorkshop = errors.New("handlers: this server has no workshop runner")

type runRequest struct {
	Variant  string `json:"variant"`
	Scenario string `json:"scenario"`
	Rate     int    `json:"rate"`
	Duration int    `json:"duration_s"`
	Watchdog bool   `json:"watchdog"`
	Fast     *bool  `json:"fast"` // absent: on
}

func (s *Server) startWorkshopRun(c *gin.Context) error {
	var req runRequest
	if _, err := decode(c, &req, smallBody, false); err != nil {
		return err
	}
	if _, err := s.lockers.Locker(req.Variant); err != nil {
		return &Error{Code: "unknown_lock", Err: err,
			Detail: fmt.Sprintf("field variant is %q; this instance allows %s", req.Variant, strings.Join(s.variants, ", "))}
	}
	if !slices.Contains(s.variants, req.Variant) {
		// The run's traffic names its variant in X-Lock-Variant, which this
		// instance would refuse.
		return errorf("variant_not_allowed", "field variant is %q; this instance allows %s", req.Variant, strings.Join(s.variants, ", "))
	}
	if s.workshop == nil {
		return errNoWorkshop
	}
	if scenarios := s.workshop.Scenarios(); !slices.Contains(scenarios, req.Scenario) {
		return &Error{Code: "invalid_run", Detail: fmt.Sprintf("unknown scenario %q (known: %v)", req.Scenario, scenarios)}
	}
	if req.Rate < 1 || req.Rate > 2000 {
		return &Error{Code: "invalid_run", Detail: fmt.Sprintf("rate must be 1 to 2000 requests per second, got %d", req.Rate)}
	}
	if req.Duration < 1 || req.Duration > 60 {
		return &Error{Code: "invalid_run", Detail: fmt.Sprintf("duration_s must be 1 to 60, got %d", req.Duration)}
	}
	fast := req.Fast == nil || *req.Fast
	id, started, err := s.workshop.Start(req.Variant, req.Scenario, req.Rate, req.Duration, req.Watchdog, fast)
	return accepted(c, id, started, err)
}

// accepted answers the start of a workshop run: 202 with its id, or 409
// while another run is in progress.
func accepted(c *gin.Context, id string, started bool, err error) error {
	if err != nil {
		return err
	}
	if !started {
		// A run resets the sale, so two at once would spoil both.
		return &Error{Code: "run_in_progress"}
	}
	c.JSON(http.StatusAccepted, gin.H{"id": id})
	return nil
}

func (s *Server) listWorkshopRuns(c *gin.Context) error {
	runs := []any{}
	if s.workshop != nil {
		runs = s.workshop.Runs()
	}
	c.JSON(http.StatusOK, runs)
	return nil
}

// workshopRun is the record of the run the route names.
func (s *Server) workshopRun(c *gin.Context) (any, error) {
	if s.workshop != nil {
		if rec, ok := s.workshop.Run(c.Param("id")); ok {
			return rec, nil
		}
	}
	return nil, &Error{Code: "unknown_run", Detail: fmt.Sprintf("no workshop run %q", c.Param("id"))}
}

func (s *Server) getWorkshopRun(c *gin.Context) error {
	rec, err := s.workshopRun(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, rec)
	return nil
}

// streamWorkshopRun replays the run's events so far, then follows it live
// until the result, the client leaves or shutdown begins. It counts against
// the stream limits like a live stream.
func (s *Server) streamWorkshopRun(c *gin.Context) error {
	if _, err := s.workshopRun(c); err != nil {
		return err
	}
	done, err := s.openStream(c)
	if err != nil {
		return err
	}
	defer done()
	id := c.Param("id")
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-cache")
	c.Status(http.StatusOK)
	rc := http.NewResponseController(c.Writer)
	next := 0
	for {
		extendWrite(rc)
		evs, changed, over := s.workshop.Events(id, next)
		for _, ev := range evs {
			c.SSEvent("", ev)
		}
		next += len(evs)
		c.Writer.Flush()
		if over { // Events read the events and the state together: nothing follows
			return nil
		}
		select {
		case <-changed:
		case <-c.Request.Context().Done():
			return nil
		case <-s.closing:
			return nil
		case <-time.After(time.Second): // notice the end of a run with no new event
		}
	}
}

// WorkshopSequencer is a WorkshopRunner that also runs the labs' sequence:
// every rung under the fault that shows its flaw, then the rung that fixes
// it, one cell at a time. Its progress is a run like any other (its record
// and its events), whose cells are its steps.
type WorkshopSequencer interface {
	// SequencePlan is the sequence as the page draws it before a run.
	SequencePlan() any
	// StartSequence begins a run of the sequence, or of its steps named in
	// only (variant/scenario); started is false while another run is in
	// progress.
	StartSequence(only []string) (id string, started bool, err error)
}

type sequenceRequest struct {
	// Only runs these steps of the sequence (variant/scenario); left out
	// (or null), it runs them all. An empty list is refused: it names no
	// step, which is almost surely a mistake rather than "all".
	Only []string `json:"only"`
}

// sequencer is the workshop runner's sequence, or errNoWorkshop.
func (s *Server) sequencer() (WorkshopSequencer, error) {
	if sq, ok := s.workshop.(WorkshopSequencer); ok {
		return sq, nil
	}
	return nil, errNoWorkshop
}

func (s *Server) getWorkshopSequence(c *gin.Context) error {
	sq, err := s.sequencer()
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, sq.SequencePlan())
	return nil
}

func (s *Server) startWorkshopSequence(c *gin.Context) error {
	var req sequenceRequest
	if _, err := decode(c, &req, smallBody, true); err != nil {
		return err
	}
	if req.Only != nil && len(req.Only) == 0 {
		return errorf("bad_json", `field only lists no step; leave it out to run the whole sequence, or name steps as "variant/scenario"`)
	}
	sq, err := s.sequencer()
	if err != nil {
		return err
	}
	id, started, err := sq.StartSequence(req.Only)
	if _, ok := errors.AsType[invalidRun](err); ok {
		return &Error{Code: "invalid_run", Detail: err.Error()}
	}
	return accepted(c, id, started, err)
}
