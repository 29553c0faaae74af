package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one run: one variant, one split of the contenders into processes.
type Row struct {
	Variant    string `json:"variant"`
	Processes  int    `json:"processes"`
	PerProcess int    `json:"goroutines_per_process"`
	// Sections is the grants that began inside the run's window.
	Sections int           `json:"sections"`
	Window   time.Duration `json:"window_ns"`
	// Rate is Sections per second of the window.
	Rate float64 `json:"sections_per_second"`
	// SectionRan is the mean critical section as it ran (a sleep overshoots).
	SectionRan time.Duration `json:"section_ran_ns"`
	// Uncontended is the mean acquire+release on a free key, measured by the
	// parent just before the run.
	Uncontended time.Duration `json:"uncontended_ns"`
	// Ceiling is 1 / (SectionRan + Uncontended): one holder after the other
	// with no time lost in between.
	Ceiling float64 `json:"ceiling_per_second"`
	// OfCeiling is Rate / Ceiling, in percent.
	OfCeiling float64       `json:"percent_of_ceiling"`
	P50Wait   time.Duration `json:"p50_wait_ns"`
	P99Wait   time.Duration `json:"p99_wait_ns"`
	MaxWait   time.Duration `json:"max_wait_ns"`
	// ProcessSpread and ClientSpread are busiest / idlest by sections done,
	// over processes and over every goroutine of every process; +Inf when
	// one got nothing.
	ProcessSpread Spread `json:"busiest_idlest_process"`
	ClientSpread  Spread `json:"busiest_idlest_client"`
	// TriesPerGrant is the attempts each granted acquire made, on average
	// (0 where the library does not say): 1 means every waiter was woken
	// only when it could win.
	TriesPerGrant float64 `json:"tries_per_grant,omitempty"`
	// Cut is the acquires still waiting when the window closed; GaveUp the
	// acquires the library itself gave up on (redsync after its 32 tries).
	Cut    int `json:"cut"`
	GaveUp int `json:"gave_up"`
	// Errors are the give-ups and failed releases, by message.
	Errors map[string]int `json:"errors,omitempty"`
	// Overlaps counts critical sections that began before an earlier one,
	// from any process, had ended: zero for a lock that excludes.
	Overlaps int `json:"overlaps"`
	// Overlap is the longest time two sections were both inside.
	Overlap time.Duration `json:"longest_overlap_ns"`
	// Handoffs splits the gaps between one section's end and the next one's
	// start by whether the next holder was in the same process or another:
	// where a lock loses time across processes.
	Handoffs Handoffs `json:"handoffs"`
}

// Handoffs are the gaps between consecutive sections: Local when the next
// holder ran in the same process, Across when it ran in another.
type Handoffs struct {
	Local      int           `json:"local"`
	Across     int           `json:"across"`
	LocalMean  time.Duration `json:"local_mean_ns"`
	AcrossMean time.Duration `json:"across_mean_ns"`
	AcrossP99  time.Duration `json:"across_p99_ns"`
	LocalP99   time.Duration `json:"local_p99_ns"`
}

// aggregate makes a row out of the contenders' reports of one run.
func aggregate(variant string, perProcess int, reps []childReport, start, end int64, uncontended time.Duration) Row {
	r := Row{Variant: variant, Processes: len(reps), PerProcess: perProcess, Window: time.Duration(end - start),
		Uncontended: uncontended, Errors: map[string]int{}}
	var all []section
	var perProc, perClient []int
	var tries int64
	grants := 0
	for p, rep := range reps {
		done := 0
		for _, c := range rep.Clients {
			n := 0
			for _, s := range c {
				if s.Start < end {
					n++
				}
			}
			perClient = append(perClient, n)
			done += n
			grants += len(c)
			for _, s := range c {
				s.proc = p
				all = append(all, s)
			}
		}
		perProc = append(perProc, done)
		r.Cut += rep.Cut
		tries += rep.Tries
		for msg, n := range rep.GaveUp {
			r.Errors["acquire: "+msg] += n
			r.GaveUp += n
		}
		for msg, n := range rep.ReleaseErrors {
			r.Errors["release: "+msg] += n
		}
	}
	r.ProcessSpread, r.ClientSpread = spread(perProc), spread(perClient)
	r.Overlaps, r.Overlap = overlaps(all)
	r.Handoffs = handoffs(all, end)
	if tries > 0 && grants > 0 {
		r.TriesPerGrant = float64(tries) / float64(grants)
	}

	var waits []time.Duration
	var ran time.Duration
	for _, s := range all {
		if s.Start >= end {
			continue
		}
		r.Sections++
		waits = append(waits, time.Duration(s.Wait))
		ran += time.Duration(s.End - s.Start)
	}
	if r.Sections == 0 {
		return r
	}
	slices.Sort(waits)
	r.P50Wait, r.P99Wait, r.MaxWait = percentile(waits, 50), percentile(waits, 99), waits[len(waits)-1]
	r.SectionRan = ran / time.Duration(r.Sections)
	r.Rate = float64(r.Sections) / r.Window.Seconds()
	r.Ceiling = 1 / (r.SectionRan + r.Uncontended).Seconds()
	r.OfCeiling = 100 * r.Rate / r.Ceiling
	return r
}

// Spread is busiest / idlest: 1 is perfectly even, +Inf means someone got
// nothing (null in JSON, which has no infinity).
type Spread float64

// MarshalJSON writes +Inf as null.
func (s Spread) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(s), 0) || math.IsNaN(float64(s)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(s))
}

// UnmarshalJSON reads null as +Inf.
func (s *Spread) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Spread(math.Inf(1))
		return nil
	}
	return json.Unmarshal(b, (*float64)(s))
}

func (s Spread) String() string {
	if math.IsInf(float64(s), 1) {
		return "∞"
	}
	return fmt.Sprintf("%.2f", float64(s))
}

// spread is busiest / idlest of done.
func spread(done []int) Spread {
	if len(done) == 0 {
		return 0
	}
	lo, hi := slices.Min(done), slices.Max(done)
	if lo == 0 {
		return Spread(math.Inf(1))
	}
	return Spread(float64(hi) / float64(lo))
}

// overlaps counts the sections that began before an earlier-begun one had
// ended, and the longest such overlap. The intervals are on one clock for
// every process (monoNow), so the count is across processes too.
func overlaps(all []section) (int, time.Duration) {
	s := slices.Clone(all)
	slices.SortFunc(s, func(a, b section) int { return cmp.Compare(a.Start, b.Start) })
	n, longest := 0, int64(0)
	var maxEnd int64 = math.MinInt64
	for _, x := range s {
		if x.Start < maxEnd {
			n++
			longest = max(longest, min(maxEnd, x.End)-x.Start)
		}
		maxEnd = max(maxEnd, x.End)
	}
	return n, time.Duration(longest)
}

// handoffs measures the gap from each section's end to the start of the
// next section, in start order, among the sections that began before end.
func handoffs(all []section, end int64) Handoffs {
	s := slices.Clone(all)
	slices.SortFunc(s, func(a, b section) int { return cmp.Compare(a.Start, b.Start) })
	var local, across []time.Duration
	for i := 1; i < len(s) && s[i].Start < end; i++ {
		gap := time.Duration(s[i].Start - s[i-1].End)
		if s[i].proc == s[i-1].proc {
			local = append(local, gap)
		} else {
			across = append(across, gap)
		}
	}
	h := Handoffs{Local: len(local), Across: len(across)}
	h.LocalMean, h.LocalP99 = meanP99(local)
	h.AcrossMean, h.AcrossP99 = meanP99(across)
	return h
}

func meanP99(d []time.Duration) (mean, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d)), percentile(d, 99)
}

// percentile is the element p % of the way into sorted, which is not
// empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[len(sorted)*p/100]
}

// Report is a whole benchmark run.
type Report struct {
	Command    string        `json:"command"`
	Started    time.Time     `json:"started"`
	Contenders int           `json:"contenders"`
	Section    time.Duration `json:"section_ns"`
	Duration   time.Duration `json:"duration_ns"`
	TTL        time.Duration `json:"lock_ttl_ns"`
	Nodes      int           `json:"redis_nodes"`
	CPUs       int           `json:"cpus"`
	// LoadBefore and LoadAfter are the machine's load average (1, 5, 15
	// minutes): the figures are only as quiet as the machine was.
	LoadBefore string `json:"load_average_before"`
	LoadAfter  string `json:"load_average_after"`
	Rows       []Row  `json:"rows"`
}

// WriteText writes the table.
func (r *Report) WriteText(w io.Writer) error {
	var ew strings.Builder
	fmt.Fprintf(&ew, "hot key: %d contenders on one key, %v critical section, %v a run, lock TTL %v, %d Redis nodes, %d CPUs\n",
		r.Contenders, r.Section, r.Duration, r.TTL, r.Nodes, r.CPUs)
	fmt.Fprintf(&ew, "load average %s before, %s after\n\n", r.LoadBefore, r.LoadAfter)
	tw := tabwriter.NewWriter(&ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contenders\tvariant\tsections/s\tceiling/s\t% of ceiling\tp50 wait\tp99 wait\tbusiest/idlest process\tbusiest/idlest client\tgave up\toverlaps\ttries/grant\thand-off here\thand-off across\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f %%\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n",
			split(row.Processes, row.PerProcess), row.Variant, row.Rate, row.Ceiling, row.OfCeiling,
			ms(row.P50Wait), ms(row.P99Wait), row.ProcessSpread, row.ClientSpread, row.GaveUp, row.Overlaps, perGrant(row.TriesPerGrant),
			handoff(row.Handoffs.Local, row.Handoffs.LocalMean), handoff(row.Handoffs.Across, row.Handoffs.AcrossMean))
	}
	tw.Flush()
	fmt.Fprintf(&ew, "\nceiling = 1 / (critical section as it ran + that lock's uncontended acquire+release, mean of %d, measured just before the run);\n"+
		"overlaps = sections, from any process, that began before another had ended (CLOCK_MONOTONIC, shared by every process)\n", soloPairs)
	for _, row := range r.Rows {
		for msg, n := range row.Errors {
			fmt.Fprintf(&ew, "%s × %d: %d× %s\n", row.Variant, row.Processes, n, msg)
		}
	}
	_, err := io.WriteString(w, ew.String())
	return err
}

// perGrant is tries per grant, or a dash where the library does not say.
func perGrant(t float64) string {
	if t == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", t)
}

// handoff is a mean gap and how many gaps it is over.
func handoff(n int, mean time.Duration) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f ms ×%d", float64(mean)/float64(time.Millisecond), n)
}

func split(procs, per int) string {
	if procs == 1 {
		return fmt.Sprintf("1 process × %d", per)
	}
	return fmt.Sprintf("%d processes × %d", procs, per)
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}
