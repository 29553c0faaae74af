package opfuzz

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// SearchOptions bound a search.
type SearchOptions struct {
	// Seed is the first sequence's seed; sequence i has Seed+i.
	Seed int64
	// Duration bounds the search (a run under way finishes; shrinking a
	// finding made before the end does too, within its budget).
	Duration time.Duration
	// Sequences bounds the number of sequences; 0 is no bound.
	Sequences int
	// ShrinkRuns is how often a candidate runs before the shrinker takes it
	// to pass; 0 does not shrink. ShrinkBudget bounds the candidates.
	ShrinkRuns, ShrinkBudget int
	// StopAtFirst ends the search at the first failing sequence.
	StopAtFirst bool
	// Nodes is the number of nodes the sequences are drawn for.
	Nodes int
	// Space is what the sequences are drawn from; the zero Space is
	// DefaultSpace.
	Space Space
	// Parallel is how many sequences run at once (default 1).
	Parallel int
	// Steer keeps every sequence whose run reached a signal no run before
	// it reached, or reached one in fewer actions than the sequence kept
	// for it (see signals and corpus; it takes Config.Signals), and draws
	// two sequences in three as mutations of a kept one that is still the
	// shortest way to some signal (see Mutate), those with rarer signals
	// more often; the rest, and all of them until one is kept, are
	// generated from their seed. A steered search is reproducible run by
	// run (each sequence is printed, and a mutation is a function of its
	// seed and its parent), not from the seed alone: what is kept depends
	// on what the runs reached.
	Steer bool
	// Progress, if set, is called with the report so far after every
	// sequence and every shrunk finding (to write it out as it grows).
	Progress func(Report)
}

// SeqReport is one sequence the search ran.
type SeqReport struct {
	Seed     int64    `json:"seed"`
	Sequence string   `json:"sequence"`
	Grants   int      `json:"grants"`
	Unsafe   int      `json:"double_grants"`
	Fenced   int      `json:"fenced_overlaps"`
	Errors   []string `json:"action_errors,omitempty"`
	TookMS   int64    `json:"took_ms"`
	// From is the seed of the kept sequence this one mutates, 0 for one
	// generated from its seed; NewSignals are the signals its run was the
	// first to reach (steered searches).
	From       int64    `json:"mutated_from,omitempty"`
	NewSignals []string `json:"new_signals,omitempty"`
}

// Finding is a sequence that gave a double grant.
type Finding struct {
	Seed int64 `json:"seed"`
	// Kind is Unsafe, or Fenced when the sequence gave only those.
	Kind     string `json:"kind"`
	Sequence string `json:"sequence"`
	// Shrunk is the shortest sequence found that still fails, "" when not
	// shrunk; ShrinkRuns is how many runs that took.
	Shrunk     string `json:"shrunk,omitempty"`
	ShrinkRuns int    `json:"shrink_runs,omitempty"`
	// First and Second are the two grants of the first such double grant.
	First  Grant `json:"first"`
	Second Grant `json:"second"`
	// FoundAfterMS is how long the search had run when it found it.
	FoundAfterMS int64 `json:"found_after_ms"`
}

// Report is what a search or a replay did.
type Report struct {
	Seed         int64       `json:"seed"`
	Replay       string      `json:"replay,omitempty"`
	AwarenessOff bool        `json:"restart_awareness_off"`
	DurationMS   int64       `json:"duration_ms"`
	Sequences    []SeqReport `json:"sequences"`
	Findings     []Finding   `json:"findings"`
	// Unsafe and Fenced count double grants over every sequence run.
	Unsafe int `json:"double_grants"`
	Fenced int `json:"fenced_overlaps"`
	// Failed counts the runs with at least one Unsafe double grant.
	Failed int `json:"failed_runs"`
	// Kept and Signals count the sequences a steered search kept and the
	// distinct signals its runs reached.
	Kept    int `json:"kept,omitempty"`
	Signals int `json:"signals,omitempty"`
}

// add records one run of seq.
func (r *Report) add(seed int64, seq Sequence, o Outcome) SeqReport {
	sr := SeqReport{Seed: seed, Sequence: seq.String(), Grants: len(o.Grants), Unsafe: o.Unsafe(),
		Fenced: len(o.Doubles) - o.Unsafe(), Errors: o.Errors, TookMS: o.Took.Milliseconds()}
	r.Sequences = append(r.Sequences, sr)
	r.Unsafe += sr.Unsafe
	r.Fenced += sr.Fenced
	if sr.Unsafe > 0 {
		r.Failed++
	}
	return sr
}

// Search runs generated sequences until the options' bounds, shrinking
// every one that gives an unsafe double grant. With Parallel above one,
// that many sequences run at once, each on nodes of its own.
func Search(ctx context.Context, rn *Runner, o SearchOptions) (Report, error) {
	start := time.Now()
	rep := Report{Seed: o.Seed, AwarenessOff: rn.cfg.AwarenessOff, Sequences: []SeqReport{}, Findings: []Finding{}}
	if o.Nodes == 0 {
		o.Nodes = rn.cfg.Nodes
	}
	if o.Space.TTLs == nil {
		o.Space.TTLs = DefaultSpace.TTLs
	}
	if o.Space.Waits == nil {
		o.Space.Waits = DefaultSpace.Waits
	}
	kept := newCorpus()
	var (
		mu   sync.Mutex
		next int64
		stop bool
		errs error
		wg   sync.WaitGroup
	)
	// locked runs f under mu, then hands the report so far to Progress.
	locked := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
		if o.Progress != nil {
			rep.DurationMS = time.Since(start).Milliseconds()
			o.Progress(rep)
		}
	}
	claim := func() (int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		i := next
		next++
		if stop || ctx.Err() != nil || time.Since(start) >= o.Duration || (o.Sequences > 0 && i >= int64(o.Sequences)) {
			return 0, false
		}
		return i, true
	}
	for w := range max(o.Parallel, 1) {
		wrn := rn
		if w > 0 {
			wrn = NewRunner(rn.ctx, rn.cfg, rn.agedFor)
			defer wrn.Close()
		}
		wg.Go(func() {
			for i, ok := claim(); ok; i, ok = claim() {
				seed := o.Seed + i
				var (
					seq  Sequence
					from int64
				)
				locked(func() { seq, from = kept.draw(seed, o) })
				out, err := wrn.Run(ctx, seq)
				if err != nil {
					if ctx.Err() == nil {
						locked(func() { errs, stop = errors.Join(errs, fmt.Errorf("sequence of seed %d: %w", seed, err)), true })
					}
					return
				}
				var sr SeqReport
				locked(func() {
					sr = rep.add(seed, seq, out)
					sr.From = from
					if o.Steer {
						sr.NewSignals = kept.add(seed, seq, out)
						rep.Kept, rep.Signals = len(kept.entries), len(kept.seen)
					}
					rep.Sequences[len(rep.Sequences)-1] = sr
				})
				rn.cfg.Logger.Info("opfuzz: sequence", "seed", seed, "grants", sr.Grants, "double_grants", sr.Unsafe, "fenced_overlaps", sr.Fenced)
				if sr.Unsafe == 0 {
					continue
				}
				f := finding(seed, seq, out)
				f.FoundAfterMS = time.Since(start).Milliseconds()
				rn.cfg.Logger.Warn("opfuzz: double grant", "seed", seed, "after", time.Since(start).Round(time.Second), "sequence", f.Sequence)
				if o.ShrinkRuns > 0 {
					f.Shrunk, f.ShrinkRuns = shrink(ctx, wrn, seq, o)
					rn.cfg.Logger.Warn("opfuzz: shrunk", "seed", seed, "runs", f.ShrinkRuns, "sequence", f.Shrunk)
				}
				locked(func() {
					rep.Findings = append(rep.Findings, f)
					stop = stop || o.StopAtFirst
				})
			}
		})
	}
	wg.Wait()
	slices.SortFunc(rep.Sequences, func(a, b SeqReport) int { return cmp.Compare(a.Seed, b.Seed) })
	slices.SortFunc(rep.Findings, func(a, b Finding) int { return cmp.Compare(a.Seed, b.Seed) })
	rep.DurationMS = time.Since(start).Milliseconds()
	return rep, errs
}

// shrink shrinks seq on rn and returns it with the runs it took.
func shrink(ctx context.Context, rn *Runner, seq Sequence, o SearchOptions) (string, int) {
	s, runs := ShrinkOn(ctx, rn, seq, o.ShrinkRuns, o.ShrinkBudget)
	return s.String(), runs
}

// ShrinkOn shrinks seq, taken to fail, on rn: a candidate fails when one of
// up to tries runs of it gives an unsafe double grant; at most budget
// candidates. It returns the shortest failing sequence found and the runs
// it took.
func ShrinkOn(ctx context.Context, rn *Runner, seq Sequence, tries, budget int) (Sequence, int) {
	runs := 0
	shrunk := Shrink(ctx, seq, func(ctx context.Context, s Sequence) bool {
		for range tries {
			runs++
			out, err := rn.Run(ctx, s)
			if err == nil && out.Unsafe() > 0 {
				return true
			}
		}
		return false
	}, budget)
	return shrunk, runs
}

// finding is the report of a run of seq that gave a double grant.
func finding(seed int64, seq Sequence, out Outcome) Finding {
	f := Finding{Seed: seed, Kind: Fenced, Sequence: seq.String()}
	for _, d := range out.Doubles {
		if d.Kind == Unsafe || f.First.Owner == "" {
			f.Kind, f.First, f.Second = d.Kind, d.First, d.Second
		}
		if d.Kind == Unsafe {
			break
		}
	}
	return f
}

// Replay runs seq runs times and counts the double grants.
func Replay(ctx context.Context, rn *Runner, seq Sequence, runs int) (Report, error) {
	start := time.Now()
	rep := Report{Seed: -1, Replay: seq.String(), AwarenessOff: rn.cfg.AwarenessOff, Sequences: []SeqReport{}, Findings: []Finding{}}
	for range runs {
		out, err := rn.Run(ctx, seq)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return rep, err
		}
		rep.add(-1, seq, out)
		if len(out.Doubles) > 0 {
			rep.Findings = append(rep.Findings, finding(-1, seq, out))
		}
	}
	rep.DurationMS = time.Since(start).Milliseconds()
	return rep, nil
}

// Summary is a few lines for a person.
func (r Report) Summary() string {
	var b strings.Builder
	what := fmt.Sprintf("search from seed %d", r.Seed)
	if r.Replay != "" {
		what = "replay of " + r.Replay
	}
	fmt.Fprintf(&b, "%s: %d run(s) in %v, %d with a double grant; %d double grant(s), %d fenced overlap(s) the store refuses\n",
		what, len(r.Sequences), (time.Duration(r.DurationMS) * time.Millisecond).Round(time.Second), r.Failed, r.Unsafe, r.Fenced)
	if r.Kept > 0 {
		fmt.Fprintf(&b, "steered: %d sequence(s) kept for %d signal(s)\n", r.Kept, r.Signals)
	}
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "- %s (seed %d, after %v): %s\n", f.Kind, f.Seed, (time.Duration(f.FoundAfterMS) * time.Millisecond).Round(time.Second), f.Sequence)
		if f.Shrunk != "" {
			fmt.Fprintf(&b, "  shrunk (%d runs): -replay '%s'\n", f.ShrinkRuns, f.Shrunk)
		}
		fmt.Fprintf(&b, "  %s %s (pid %d, TTL %s) and %s %s (pid %d, TTL %s), both valid for %v\n",
			f.First.Variant, f.First.Owner, f.First.PID, f.First.TTL, f.Second.Variant, f.Second.Owner, f.Second.PID, f.Second.TTL,
			time.Duration(min(f.First.End(), f.Second.End())-f.Second.Acquired).Round(time.Millisecond))
	}
	return b.String()
}

// corpus is what a steered search keeps: the sequences whose runs reached
// a signal first or more cheaply than the one kept for it, how many runs
// reached each signal, and for each signal the cheapest kept sequence that
// reached it (its "best": the fewest actions, then the shortest run), as
// AFL keeps a favoured input per edge. Only a sequence that is the best
// for some signal is picked to mutate: the corpus then holds the shortest
// way to each thing the lock did, not every longer one that also got
// there, and mutations start from short, quick runs.
type corpus struct {
	entries []keptSeq
	seen    map[string]int
	best    map[string]int // signal → index in entries
}

// newCorpus is an empty corpus.
func newCorpus() *corpus { return &corpus{seen: map[string]int{}, best: map[string]int{}} }

// keptSeq is one kept sequence.
type keptSeq struct {
	seed    int64
	seq     Sequence
	took    time.Duration
	signals []string
	picked  int
}

// cheaper reports whether a is a cheaper way to a signal than b: fewer
// actions, then a shorter run.
func (a keptSeq) cheaper(b keptSeq) bool {
	return cmp.Or(cmp.Compare(len(a.seq), len(b.seq)), cmp.Compare(a.took, b.took)) < 0
}

// add counts the signals of a run of seq and keeps seq if one of them is
// new or seq is a cheaper way to one; it returns the new ones. A run that
// gave an unsafe double grant is a finding, not kept: the search goes on
// elsewhere.
func (c *corpus) add(seed int64, seq Sequence, out Outcome) []string {
	e := keptSeq{seed: seed, seq: seq, took: out.Took, signals: out.Signals}
	var fresh, bested []string
	for _, s := range out.Signals {
		if c.seen[s] == 0 {
			fresh = append(fresh, s)
		}
		c.seen[s]++
		if i, ok := c.best[s]; !ok || e.cheaper(c.entries[i]) {
			bested = append(bested, s)
		}
	}
	if len(bested) > 0 && out.Unsafe() == 0 {
		c.entries = append(c.entries, e)
		for _, s := range bested {
			c.best[s] = len(c.entries) - 1
		}
	}
	return fresh
}

// draw is the sequence of seed: two times in three, once a sequence is
// kept, a mutation of a kept one that is the best for some signal, picked
// by the rarity of the signals it is the best for (the sum of one over how
// many runs reached each), less often the more it was picked; else the
// generated one. from is the kept one's seed, or 0.
func (c *corpus) draw(seed int64, o SearchOptions) (seq Sequence, from int64) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x3c6ef372fe94f82b))
	if !o.Steer || len(c.entries) == 0 || r.IntN(3) == 0 {
		return Generate(seed, o.Nodes, o.Space), 0
	}
	weights := make([]float64, len(c.entries))
	sum, last := 0.0, 0
	for i, e := range c.entries {
		for _, s := range e.signals {
			if c.best[s] == i {
				weights[i] += 1 / float64(c.seen[s])
			}
		}
		if weights[i] > 0 {
			weights[i] /= float64(1 + e.picked)
			sum, last = sum+weights[i], i
		}
	}
	pick, i := r.Float64()*sum, 0
	for ; i < last && (weights[i] == 0 || pick >= weights[i]); i++ {
		pick -= weights[i]
	}
	c.entries[i].picked++
	return Mutate(c.entries[i].seq, seed, o.Nodes, o.Space), c.entries[i].seed
}
