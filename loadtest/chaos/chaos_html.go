package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"flashsale/loadtest"
	"flashsale/loadtest/output"
)

// WriteFiles writes chaos.json and chaos.html into dir.
func (r *Report) WriteFiles(dir string) error {
	return output.WriteFiles(dir,
		output.File{Name: "chaos.json", Write: func(w io.Writer) error { return output.JSON(w, r) }},
		output.File{Name: "chaos.html", Write: r.WriteHTML},
	)
}

// WriteText writes the verdict table.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: seed %d, %s, %d app instances, %d Redis nodes, lease TTL %s\n", r.Seed, r.Duration, r.Instances, r.Nodes, r.LockTTL)
	fmt.Fprintf(&b, "nemesis: %s\n", r.nemesisSummary())
	r.recoveryText(&b)
	b.WriteString("\n")
	fmt.Fprintf(&b, "%-14s %-8s %-7s %-7s %8s %6s %8s %8s %7s %6s %9s %6s %10s %12s\n",
		"variant", "expected", "seen", "", "overlaps", "stale", "oversold", "lost-upd", "dbl-bkd", "stuck", "lost-acks", "201s", "inversions", "linearizable")
	for _, name := range r.order {
		v := r.Variants[name]
		mark := map[string]string{"ok": "ok", "nodemo": "NO-DEMO", "bug": "BUG"}[v.judgement()]
		fmt.Fprintf(&b, "%-14s %-8s %-7s %-7s %8d %6d %8d %8d %7d %6d %9d %6d %10d %12s\n", name, v.Expected, v.Verdict, mark,
			v.LockOverlaps, v.StaleWrites, v.OversoldUnits, v.LostUpdates, v.DoubleBookedSeats, v.StuckLocks, v.LostAcknowledgedOrders, v.Answers["201"], v.TokenInversions,
			v.linearMark())
	}
	for _, name := range r.order {
		v := r.Variants[name]
		if l := v.Linear; l != nil {
			fmt.Fprintf(&b, "\n%s: porcupine: %s, %d ops (%d writes, %d of unknown outcome, %d reads; %d orders of 2 or 3 units, %d contradicted by their own answers), %d partitions, checked in %v",
				name, l.Result, l.Ops, l.Writes, l.Maybe, l.Reads, l.MultiUnit, l.Contradicted, l.Partitions, l.Took.Round(time.Millisecond))
			if v.HistoryFile != "" {
				fmt.Fprintf(&b, "; picture: %s", v.HistoryFile)
			}
		}
		if v.Disagreement != "" && v.DisagreementDeclared != "" {
			fmt.Fprintf(&b, "\n  disagreement, declared (%s): %s", v.DisagreementDeclared, v.Disagreement)
		} else if v.Disagreement != "" {
			fmt.Fprintf(&b, "\n  DISAGREEMENT: %s", v.Disagreement)
		}
		fmt.Fprintf(&b, "\n  %d requests unanswered", v.Unanswered)
		for _, u := range v.UnansweredNamed {
			fmt.Fprintf(&b, "\n  UNANSWERED: %s, waited %v (%s)", u.Request, u.Waited.Round(time.Millisecond), u.Error)
		}
	}
	b.WriteString("\n")
	for _, name := range r.order {
		v := r.Variants[name]
		if fv := v.FirstViolation; fv != nil {
			fmt.Fprintf(&b, "\n%s, first violation at t+%s: %s — %s\n", name, r.since(fv.Time), fv.Kind, fv.Detail)
			if len(fv.Nemesis) > 0 {
				fmt.Fprintf(&b, "  nemesis around it: %s\n", strings.Join(fv.Nemesis, "; "))
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) nemesisSummary() string {
	var parts []string
	counts := map[string]int{}
	for _, e := range r.Nemesis {
		if e.Op != "end" {
			counts[e.Fault]++
		}
	}
	for _, k := range FaultKinds {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, counts[k]))
		}
	}
	if len(parts) == 0 {
		return "no faults"
	}
	return strings.Join(parts, ", ")
}

func (r *Report) since(t time.Time) string {
	if t.IsZero() {
		return "end"
	}
	return fmt.Sprintf("%.2fs", t.Sub(r.RunStart).Seconds())
}

// WriteHTML writes one self-contained page: the verdicts, and a timeline
// with the nemesis's faults, each variant's holders of its hot SKU's lock
// and its violations on one time axis.
func (r *Report) WriteHTML(w io.Writer) error {
	var b strings.Builder
	esc := output.Esc
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>flashsale chaos run</title><style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
td:first-child,th:first-child{text-align:left}.bug{background:#fdd}.ok{background:#efe}.nodemo{background:#ffe}svg text{font:11px system-ui,sans-serif}
</style></head><body>`)
	fmt.Fprintf(&b, "<h1>Chaos run: seed %d, %s</h1><p>%d app instances, %d Redis nodes, lease TTL %s. Nemesis: %s.</p>",
		r.Seed, esc(r.Duration), r.Instances, r.Nodes, esc(r.LockTTL), esc(r.nemesisSummary()))
	if r.Command != "" {
		fmt.Fprintf(&b, "<p><code>%s</code></p>", esc(r.Command))
	}
	b.WriteString("<table><tr><th>variant</th><th>expected</th><th>seen</th><th>lock overlaps</th><th>stale writes</th><th>oversold</th><th>lost updates</th><th>double-booked</th><th>stuck locks</th><th>lost acks</th><th>201s</th><th>token inversions</th><th>linearizable</th><th>first violation</th></tr>")
	for _, name := range r.order {
		v := r.Variants[name]
		class := v.judgement()
		first := ""
		if fv := v.FirstViolation; fv != nil {
			first = fmt.Sprintf("t+%s %s: %s", r.since(fv.Time), fv.Kind, fv.Detail)
			if len(fv.Nemesis) > 0 {
				first += " — nemesis: " + strings.Join(fv.Nemesis, "; ")
			}
		}
		lin := esc(v.linearMark())
		if v.HistoryFile != "" {
			lin = fmt.Sprintf(`<a href="%s">%s</a>`, esc(v.HistoryFile), lin)
		}
		if v.Disagreement != "" {
			first = "disagreement: " + v.Disagreement + "; " + first
		}
		fmt.Fprintf(&b, `<tr class="%s"><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td style="text-align:left">%s</td></tr>`,
			class, esc(name), v.Expected, v.Verdict, v.LockOverlaps, v.StaleWrites, v.OversoldUnits, v.LostUpdates, v.DoubleBookedSeats, v.StuckLocks, v.LostAcknowledgedOrders, v.Answers["201"], v.TokenInversions, lin, esc(first))
	}
	b.WriteString("</table>")
	r.recoveryHTML(&b)
	r.timeline(&b)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "<p>note: %s</p>", esc(n))
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// timeline draws the SVG: one row per fault kind, then per variant a row of
// its hot SKU's lock holders (shaded by how much of each slice of time some
// holder believed the lease) with its violations as red marks.
func (r *Report) timeline(b *strings.Builder) {
	const left, width, row = 120, 1100, 18
	d, _ := time.ParseDuration(r.Duration)
	if d <= 0 {
		return
	}
	x := func(t time.Time) float64 {
		return left + float64(width)*min(max(t.Sub(r.RunStart).Seconds()/d.Seconds(), 0), 1)
	}
	var kinds []string
	for _, k := range FaultKinds {
		if slices.ContainsFunc(r.Nemesis, func(e NemesisRecord) bool { return e.Fault == k }) {
			kinds = append(kinds, k)
		}
	}
	height := (len(kinds)+2*len(r.order))*row + 40
	fmt.Fprintf(b, `<h2>Timeline</h2><svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">`, left+width+10, height)
	y := 10
	esc := output.Esc
	for _, k := range kinds {
		fmt.Fprintf(b, `<text x="4" y="%d">%s</text>`, y+12, k)
		open := map[string]NemesisRecord{}
		for _, e := range r.Nemesis {
			if e.Fault != k {
				continue
			}
			switch e.Op {
			case "start":
				open[e.Target] = e
			case "end":
				s, ok := open[e.Target]
				if !ok {
					continue
				}
				delete(open, e.Target)
				fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#e8a33c"><title>%s %s: %s</title></rect>`,
					x(s.Time), y+2, max(x(e.Time)-x(s.Time), 1), row-4, esc(k), esc(s.Target), esc(s.Detail))
			default:
				fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="2" height="%d" fill="#c0392b"><title>%s %s: %s</title></rect>`,
					x(e.Time), y+2, row-4, esc(k), esc(e.Target), esc(e.Detail))
			}
		}
		y += row
	}
	const slices = width / 2
	for _, name := range r.order {
		v := r.Variants[name]
		fmt.Fprintf(b, `<text x="4" y="%d">%s</text>`, y+12, esc(name))
		cover := make([]float64, slices)
		per := d.Seconds() / slices
		for _, s := range r.holders[name] {
			from, to := s.From.Sub(r.RunStart).Seconds(), s.To.Sub(r.RunStart).Seconds()
			for i := max(int(from/per), 0); i < slices && float64(i)*per < to; i++ {
				lo, hi := max(from, float64(i)*per), min(to, float64(i+1)*per)
				if hi > lo {
					cover[i] += (hi - lo) / per
				}
			}
		}
		for i, c := range cover {
			if c > 0 {
				fmt.Fprintf(b, `<rect x="%d" y="%d" width="2" height="%d" fill="#2e8b57" fill-opacity="%.2f"/>`, left+2*i, y+2, row-4, min(c, 1))
			}
		}
		y += row
		for _, vi := range v.Violations {
			if vi.Time.IsZero() {
				continue
			}
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%d" r="4" fill="#c00"><title>t+%s %s %s: %s</title></circle>`,
				x(vi.Time), y+row/2-4, r.since(vi.Time), esc(vi.Kind), esc(vi.Key), esc(vi.Detail))
		}
		y += row
	}
	for s := 0.0; s <= d.Seconds(); s += tickEvery(d) {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%gs</text>`, left+float64(width)*s/d.Seconds(), y+14, s)
	}
	b.WriteString(`</svg><p>Orange: a fault in place (hover for details); dark red bar: an instant fault (a clock jump). Green: a holder of the variant's hot-SKU lock believed its lease (darker = more of that slice of time); red dot: a violation the checker found (hover).</p>`)
}

func tickEvery(d time.Duration) float64 {
	for _, s := range []float64{1, 5, 10, 30, 60} {
		if d.Seconds()/s <= 12 {
			return s
		}
	}
	return 120
}

// judgement is how a variant's verdict stands against its expectation:
// "ok"; "bug", a variant that must hold broke; "nodemo", one expected to
// break held (this run's faults did not catch it).
func (v *Variant) judgement() string {
	switch {
	case v.OK:
		return "ok"
	case v.Expected == loadtest.Holds:
		return "bug"
	default:
		return "nodemo"
	}
}
