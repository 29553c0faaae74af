package workshop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"flashsale/curriculum"
	"flashsale/inventory"
	"flashsale/loadtest"
	"flashsale/loadtest/cluster"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// ErrInvalidRun marks a request the runner refuses as it stands (a step
// that is not in the sequence): the caller's mistake, not the run's. The
// HTTP layer answers it 422 by its InvalidRun method.
var ErrInvalidRun error = invalidRun{}

type invalidRun struct{}

func (invalidRun) Error() string { return "invalid workshop run" }

// InvalidRun marks the error as a request refused as it stands.
func (invalidRun) InvalidRun() {}

// Step is one cell of the workshop's sequence: a rung under a scenario, at
// a rate and for a time short enough for the whole ladder to run in under
// two minutes, long enough for the cell to show what it must.
type Step struct {
	Variant    string `json:"variant"`
	Scenario   string `json:"scenario"`
	Rate       int    `json:"rate"`
	DurationMS int    `json:"duration_ms"`
}

// ID names the step as the load runner names cells: variant/scenario.
func (s Step) ID() string { return s.Variant + "/" + s.Scenario }

// Sequence is the labs' ladder as one list: every rung under the fault that
// shows its flaw, then the rung that fixes it; the page draws whatever this
// list holds. It is the labs' steps, then every rung of the ladder they do
// not name, under the column its entry says shows it: a new rung is in the
// sequence without a line here.
var Sequence = sequence()

// labSteps are the labs' steps in the order the labs take them.
var labSteps = []Step{
	{ladder.None, loadtest.Clean, 300, 1500},
	{lock.Lua, loadtest.Clean, 300, 1500},
	{ladder.SetNXExpire, loadtest.CrashBetweenSteps, 300, 2000},
	{lock.Lua, loadtest.CrashBetweenSteps, 300, 2000},
	{ladder.GetDel, loadtest.PauseBetweenReleaseSteps, 300, 3000},
	{lock.Lua, loadtest.PauseBetweenReleaseSteps, 300, 3000},
	{ladder.PlainDel, loadtest.PauseInCriticalSection, 300, 2000},
	{lock.Lua, loadtest.PauseInCriticalSection, 300, 2000},
	{lock.LuaFence, loadtest.PauseInCriticalSection, 300, 2000},
	{lock.Redlock, loadtest.NodeDown, 300, 3000},
	{lock.Redlock, loadtest.NodeRestartUnaware, 200, 2000},
	{lock.Redlock, loadtest.NodeRestart, 200, 2000},
	{lock.Redlock, loadtest.PauseInCriticalSection, 300, 2000},
	{lock.RedlockFence, loadtest.PauseInCriticalSection, 300, 2000},
	{ladder.ArticleRedlock, loadtest.Clean, 300, 1500},
	{lock.Redlock, loadtest.Clean, 300, 1500},
	{ladder.Redsync, loadtest.Clean, 300, 1500},
	{lock.Lua, loadtest.LongWork, 300, 3000},
	{lock.Lua, loadtest.LongWorkWatchdog, 300, 3000},
	{ladder.LuaCheck, loadtest.PauseAfterLeaseCheck, 300, 2000},
	{lock.LuaFence, loadtest.PauseAfterLeaseCheck, 300, 2000},
	{inventory.DBGuard, loadtest.PauseInCriticalSection, 300, 2000},
	{inventory.DBForUpdate, loadtest.PauseInCriticalSection, 300, 2000},
	{inventory.RedisStock, loadtest.PauseInCriticalSection, 300, 2000},
	{ladder.Attendee, loadtest.Clean, 300, 1500},
}

// sequence is labSteps and a step for every rung they leave out.
func sequence() []Step {
	out := slices.Clone(labSteps)
	for _, r := range curriculum.Lessons() {
		if !slices.ContainsFunc(out, func(s Step) bool { return s.Variant == r.Name }) {
			out = append(out, Step{r.Name, r.ShowsWith, 300, 2000})
		}
	}
	return out
}

// sequenceTTL is the lease TTL of the environment the sequence starts for
// itself: the command line's default, which every lab's timing is sized
// for.
const sequenceTTL = 500 * time.Millisecond

// seqStep is a step of a running sequence, as the page reads it.
type seqStep struct {
	Step
	Expected string   `json:"expected"`
	Nodes    bool     `json:"nodes"` // needs Redis nodes and app instances of the sequence's own
	State    string   `json:"state"` // waiting, running, done, failed, skipped
	Cell     *runCell `json:"cell,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// needsOwnEnvironment reports whether scenario acts on the Redis nodes or
// needs app instances started with other settings: only an environment the
// sequence started itself can give either.
func needsOwnEnvironment(scenario string) bool {
	for _, s := range loadtest.Scenarios(time.Second) {
		if s.Name == scenario {
			return s.Nodes != nil || s.Unaware || s.LockTTL != 0
		}
	}
	return false
}

// UseOwnEnvironment tells the runner that this instance started its own
// redis-server nodes, so the machine can run Redis nodes and app instances
// for the sequence: it then runs every step in an environment of its own
// (Redis nodes, and app instances of appBin, the storefront binary), node
// scenarios included, and leaves this instance's nodes alone.
func (w *Runner) UseOwnEnvironment(appBin string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.appBin = appBin
}

// SequencePlan is the sequence as the page draws it before a run: its
// steps with their expected outcomes, and, when node scenarios cannot run
// here, why.
func (w *Runner) SequencePlan() any {
	w.mu.Lock()
	own := w.appBin != ""
	w.mu.Unlock()
	steps := planSteps(w.sized(Sequence, own))
	plan := event{"steps": steps, "node_scenarios": own}
	if !own {
		plan["why_no_nodes"] = noNodes + w.longerTTL()
	}
	return plan
}

// noNodes says why the node steps are skipped on this instance.
const noNodes = "node scenarios are skipped: this instance did not start its own redis-server nodes (it was given -redis, " +
	"or runs in-process nodes), and the sequence stops and restarts nodes only on a machine where it may start its own"

// longerTTL warns, when the steps run against this instance with a lease
// TTL longer than they are sized for, that some may not show their flaw.
func (w *Runner) longerTTL() string {
	if w.ttl <= sequenceTTL {
		return ""
	}
	return fmt.Sprintf("; the other steps run against this instance, whose lease TTL (%v) is longer than the %v they are sized for: "+
		"each lasts longer in proportion, and a rung may still not show its flaw in one (get-del's late DEL, say)", w.ttl, sequenceTTL)
}

// noNodesNote is the note that says why the node steps are skipped, its
// fields the lease TTLs the English gives when the instance's is longer.
func (w *Runner) noNodesNote() event {
	var as []slog.Attr
	if w.ttl > sequenceTTL {
		as = []slog.Attr{slog.Duration("lease_ttl", w.ttl), slog.Duration("sized_for", sequenceTTL)}
	}
	ev := noteEvent("node scenarios skipped", as...)
	ev["message"] = noNodes + w.longerTTL()
	return ev
}

// sized are the steps as they run here. They are sized for the sequence's
// own environment (sequenceTTL); against this instance, whose lease TTL may
// be longer, every pause of a scenario is longer too (they are sized from
// the TTL), so every cell lasts longer in proportion, or its fault would
// barely fire before the cell ends.
func (w *Runner) sized(steps []Step, own bool) []Step {
	if own || w.ttl <= sequenceTTL {
		return steps
	}
	out := slices.Clone(steps)
	for i := range out {
		out[i].DurationMS = int(int64(out[i].DurationMS) * int64(w.ttl) / int64(sequenceTTL))
	}
	return out
}

func planSteps(steps []Step) []*seqStep {
	out := make([]*seqStep, len(steps))
	for i, s := range steps {
		exp, _ := loadtest.Expected(s.Variant, s.Scenario)
		out[i] = &seqStep{Step: s, Expected: string(exp), Nodes: needsOwnEnvironment(s.Scenario), State: "waiting"}
	}
	return out
}

// StartSequence begins a run of the sequence, or of its steps named in only
// (variant/scenario) when only is not empty, and returns its id. Like
// Start, nothing runs while another run is in progress.
func (w *Runner) StartSequence(only []string) (id string, started bool, err error) {
	steps := Sequence
	if len(only) > 0 {
		steps = nil
		for _, s := range Sequence {
			if slices.Contains(only, s.ID()) {
				steps = append(steps, s)
			}
		}
		for _, o := range only {
			if !slices.ContainsFunc(Sequence, func(s Step) bool { return s.ID() == o }) {
				return "", false, fmt.Errorf("%w: %q is not a step of the sequence", ErrInvalidRun, o)
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ok, err := w.idle(); !ok {
		return "", false, err
	}
	r := &workshopRun{
		ID: strconv.Itoa(len(w.runs) + 1), Kind: "sequence", State: "running", StartedAt: time.Now(),
		changed: make(chan struct{}), holds: map[string]*hold{}, Steps: planSteps(w.sized(steps, w.appBin != "")),
	}
	w.begin(r)
	go w.runSequence(r, w.base, w.appBin)
	return r.ID, true, nil
}

// runSequence runs the steps one cell at a time, each its own load-runner
// run with its own rate and duration, reporting each cell as it comes.
func (w *Runner) runSequence(r *workshopRun, base, appBin string) {
	defer func() {
		w.mu.Lock()
		w.current = nil
		w.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	notes := slog.New(&noteHandler{run: r})
	var env *cluster.Local
	if appBin != "" {
		r.emit(noteEvent("starting the sequence's own environment: 5 Redis nodes and 3 app instances"))
		var err error
		env, err = cluster.StartLocal(ctx, cluster.LocalConfig{AppBin: appBin, LockTTL: sequenceTTL, Logger: notes})
		if err != nil {
			w.finishSequence(r, fmt.Errorf("starting the sequence's environment: %w", err))
			return
		}
		defer func() {
			if err := env.Close(); err != nil {
				w.log.Warn("workshop sequence: stopping its environment", "err", err)
			}
		}()
	} else {
		r.emit(w.noNodesNote())
	}
	for i, st := range r.Steps {
		if st.Nodes && env == nil {
			r.setStep(i, "skipped", nil, noNodes)
			continue
		}
		r.setStep(i, "running", nil, "")
		cfg := loadtest.Config{
			Variants: []string{st.Variant}, Scenarios: []string{st.Scenario},
			Rate: st.Rate, Duration: time.Duration(st.DurationMS) * time.Millisecond,
			Seed: 1, WarmUp: -1, Logger: notes,
		}
		if env != nil {
			cfg.Env, cfg.LockTTL = env, sequenceTTL
		} else {
			cfg.Targets, cfg.AdminToken, cfg.RedisURLs, cfg.LockTTL = []string{base}, w.token, w.redisURLs, w.ttl
		}
		cell, picture, err := runOne(ctx, cfg, st.Variant, st.Scenario)
		if err != nil {
			if ctx.Err() != nil {
				w.finishSequence(r, err)
				return
			}
			r.setStep(i, "failed", nil, err.Error())
			continue
		}
		rc := toRunCell(cell, nil, "")
		rc.HistoryHTML = picture
		r.setStep(i, "done", rc, "")
	}
	w.finishSequence(r, nil)
}

// runOne runs one cell and returns it, or why there is none.
//
// Its output goes to a directory of its own, removed after: what the page
// keeps of it is porcupine's picture of a history that is not
// linearizable, returned as the page it is ("" for none).
func runOne(ctx context.Context, cfg loadtest.Config, variant, scenario string) (*loadtest.Cell, string, error) {
	dir, err := os.MkdirTemp("", "workshop-run-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	cfg.OutDir = dir
	report, err := loadtest.Run(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	cell := report.Cell(variant, scenario)
	switch {
	case cell == nil:
		return nil, "", errors.New("the load runner did not run this cell (see the notes)")
	case cell.Verdict == loadtest.VerdictSkipped:
		return nil, "", fmt.Errorf("the load runner skipped this cell: %s", strings.Join(cell.Notes, "; "))
	}
	var picture []byte
	if cell.HistoryFile != "" {
		if picture, err = os.ReadFile(filepath.Join(dir, cell.HistoryFile)); err != nil {
			cell.Notes = append(cell.Notes, "reading the history's picture: "+err.Error())
		}
		cell.HistoryFile = ""
	}
	cell.ResultsFile = ""
	return cell, string(picture), nil
}

// setStep records step i's state and tells the page.
func (r *workshopRun) setStep(i int, state string, cell *runCell, msg string) {
	r.mu.Lock()
	st := r.Steps[i]
	st.State, st.Cell, st.Error = state, cell, msg
	ev := event{"type": "step", "index": i, "step": *st}
	r.mu.Unlock()
	r.emit(ev)
}

// stepsNow copies the steps as they stand, to be encoded after the lock is
// given back. The caller holds r.mu.
func (r *workshopRun) stepsNow() []seqStep {
	out := make([]seqStep, len(r.Steps))
	for i, st := range r.Steps {
		out[i] = *st
	}
	return out
}

// finishSequence ends the run: done, or failed with err.
func (w *Runner) finishSequence(r *workshopRun, err error) {
	r.mu.Lock()
	result := event{"type": "result", "steps": r.stepsNow()}
	if err != nil {
		r.State, r.Error = "failed", err.Error()
		result = event{"type": "error", "message": r.Error}
	} else {
		r.State = "done"
	}
	r.mu.Unlock()
	if err != nil {
		w.log.Warn("workshop sequence failed", "id", r.ID, "err", err)
	}
	r.emit(result)
}
