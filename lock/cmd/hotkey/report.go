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
}

// aggregate makes a row out of the contenders' reports of one run.
func aggregate(variant string, perProcess int, reps []childReport, start, end int64, uncontended time.Duration) Row {
	r := Row{Variant: variant, Processes: len(reps), PerProcess: perProcess, Window: time.Duration(end - start),
		Uncontended: uncontended, Errors: map[string]int{}}
	var all []section
	var perProc, perClient []int
	for _, rep := range reps {
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
			all = append(all, c...)
		}
		perProc = append(perProc, done)
		r.Cut += rep.Cut
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
	r.P50Wait, r.P99Wait, r.MaxWait = waits[len(waits)/2], waits[len(waits)*99/100], waits[len(waits)-1]
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
	fmt.Fprintln(tw, "contenders\tvariant\tsections/s\tceiling/s\t% of ceiling\tp50 wait\tp99 wait\tbusiest/idlest process\tbusiest/idlest client\tgave up\toverlaps\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f %%\t%s\t%s\t%s\t%s\t%d\t%d\t\n",
			split(row.Processes, row.PerProcess), row.Variant, row.Rate, row.Ceiling, row.OfCeiling,
			ms(row.P50Wait), ms(row.P99Wait), row.ProcessSpread, row.ClientSpread, row.GaveUp, row.Overlaps)
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
