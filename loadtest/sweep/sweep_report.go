package sweep

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"flashsale/loadtest/output"
)

// database names the sweep's database, as the text says it.
func (r *Report) database() string {
	if r.Database == "PostgreSQL" {
		return "one PostgreSQL database"
	}
	return "one SQLite file"
}

// WriteText writes the sweep's table: one row per variant, one group of
// columns (sent/s, sales/s, % 503, p50, p99, late, hold) per step, then the
// spike of each variant when the rates rise and fall again.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	batch := ""
	if r.Batch {
		batch = ", orders batched under one lease"
	}
	fmt.Fprintf(&b, "flashsale hot-key sweep: one SKU that never sells out, %d ms of work in every critical section, %v per rate, "+
		"lock TTL %v, lock wait %v, %d app instances, %d Redis nodes, %s%s\n",
		r.WorkMS, r.Duration, r.LockTTL, r.LockWait, r.Instances, r.Nodes, r.database(), batch)
	fmt.Fprintf(&b, "load average %s before, %s after\n\n", r.LoadBefore, r.LoadAfter)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "offered/s →\t")
	for _, rate := range r.Rates {
		fmt.Fprintf(tw, "%d: sent/s\tsales/s\t%% 503\tp50\tp99\tlate\thold\t", rate)
	}
	fmt.Fprintln(tw)
	for _, rw := range r.rows() {
		fmt.Fprintf(tw, "%s\t", rw.Variant)
		for _, st := range rw.Steps {
			if st == nil {
				fmt.Fprint(tw, "ERROR\t\t\t\t\t\t\t")
				continue
			}
			hold := "—"
			if st.Hold > 0 {
				hold = output.Millis(st.Hold)
			}
			fmt.Fprintf(tw, "%.0f\t%s\t%.0f %%\t%s\t%s\t%d\t%s\t", st.Summary.Sent, sales(st), st.Unavailable,
				output.Millis(st.Summary.P50), output.Millis(st.Summary.P99), st.Late, hold)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nsent/s: the rate vegeta really sent (below the offered rate when the machine could not keep up); sales/s: distinct orders confirmed per second of the send window; %% 503: overloaded, lock_busy and lock_unavailable answers "+
		"(a request waits at most the lock wait); p50, p99: latency of every request; late: requests answered later than the lock wait + %v; hold: mean time a lease was held (grant to release: "+
		"the critical section with its database reads and writes), so 1 / hold is as fast as one hot key can sell with any lock", LateMargin)
	if len(r.Bare) > 0 {
		fmt.Fprintf(&b, "; %s: the bare exchange at each rate, no lock and no sale: what this machine answers in time", Bare)
	}
	fmt.Fprint(&b, "; cores (below each step): the CPU the app instances and the runner used during it, in cores")
	fmt.Fprintln(&b)
	for _, sp := range r.Spikes {
		fmt.Fprintln(&b, spikeLine(sp))
	}
	fmt.Fprintf(&b, "\nlatency: %s\n", r.LatencyNote)
	for _, c := range r.Capacity {
		fmt.Fprintf(&b, "capacity: %s\n", c.Line)
	}
	for _, st := range append(slices.Clone(r.Bare), r.Steps...) {
		var notes []string
		if st.Err != "" {
			notes = append(notes, "error: "+st.Err)
		}
		if st.LostUpdates > 0 {
			notes = append(notes, fmt.Sprintf("%d lost updates", st.LostUpdates))
		}
		notes = append(notes, st.CrossCheck...)
		if st.Cores != nil {
			notes = append(notes, fmt.Sprintf("cores: apps %.2f, runner %.2f", st.Cores.Apps, st.Cores.Runner))
		}
		if codes := output.Counts(st.Summary.Counts.ByError); codes != "" {
			notes = append(notes, "answers: "+codes)
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, "  %s × %d/s: %s\n", st.Variant, st.Rate, strings.Join(notes, "; "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error { return output.JSON(w, r) }

// SalesChart draws the completed sales per second against the offered
// rate, one line per variant, with the offered rate itself as a dashed
// diagonal: where a line leaves the diagonal, the hot key is saturated.
func (r *Report) SalesChart() string {
	return r.lineChart("sales/s by offered rate, one hot SKU", func(st *Step) float64 { return st.Sales }, true, nil)
}

// P99Chart draws the p99 latency in milliseconds against the offered rate,
// with the lock-wait budget and half of it as guides.
func (r *Report) P99Chart() string {
	wait := float64(r.LockWait) / float64(time.Millisecond)
	return r.lineChart("p99 latency (ms) by offered rate, one hot SKU",
		func(st *Step) float64 { return float64(st.Summary.P99) / float64(time.Millisecond) }, false,
		[]guide{{wait, "lock wait"}, {wait / 2, "half the lock wait"}})
}

// guide is a labelled horizontal line of a chart.
type guide struct {
	y     float64
	label string
}

// lineChart is a standalone SVG line chart of value over the offered rates,
// one line per variant. Nothing is fetched to draw it.
func (r *Report) lineChart(title string, value func(*Step) float64, diagonal bool, guides []guide) string {
	const (
		left, right, top, bottom = 56.0, 130.0, 40.0, 44.0
		plotW, plotH             = 440.0, 260.0
	)
	width, height := left+plotW+right, top+plotH+bottom
	// The x axis is the offered rate while the rates only rise; a spike,
	// which comes back down, is drawn step by step instead.
	pos := func(ri int) float64 { return float64(r.Rates[ri]) }
	xMax := float64(slices.Max(r.Rates))
	if !r.rising() {
		pos, xMax, diagonal = func(ri int) float64 { return float64(ri + 1) }, float64(len(r.Rates)), false
	}
	peak := 0.0
	for i := range r.Steps {
		if r.Steps[i].Err == "" {
			peak = math.Max(peak, value(&r.Steps[i]))
		}
	}
	for _, g := range guides {
		peak = math.Max(peak, g.y)
	}
	yMax, step := output.NiceScale(peak)
	x := func(v float64) float64 { return left + v/xMax*plotW }
	y := func(v float64) float64 { return top + plotH - v/yMax*plotH }

	var b strings.Builder
	output.OpenSVG(&b, width, height, left, title)
	output.GridY(&b, yMax, step, left, left+plotW, y)
	for ri, rate := range r.Rates {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#eee"/>`, x(pos(ri)), x(pos(ri)), top, top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d/s</text>`+"\n", x(pos(ri)), top+plotH+16, rate)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">offered rate</text>`+"\n", left+plotW/2, top+plotH+34)
	if diagonal {
		end := math.Min(xMax, yMax)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4 4"><title>offered</title></line>`+"\n", x(0), y(0), x(end), y(end))
	}
	for _, g := range guides {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4 4"/>`, left, left+plotW, y(g.y), y(g.y))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" fill="#777" dominant-baseline="middle">%s</text>`+"\n", left+plotW+6, y(g.y), output.Esc(g.label))
	}
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, left+plotW, y(0), y(0))
	for vi, v := range r.Variants {
		color := output.Color(vi)
		var pts []string
		for ri, rate := range r.Rates {
			st := r.at(vi, ri)
			if st == nil || st.Err != "" {
				continue
			}
			px, py := x(pos(ri)), y(value(st))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s at %d/s: %s</title></circle>`, px, py, color, output.Esc(v), rate, output.Num(math.Round(value(st))))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color)
		ly := top + 10 + 16*float64(vi)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left+plotW+10, ly-9, color, left+plotW+24, ly, output.Esc(v))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// page is the self-contained sweep report: inline CSS and SVG only.
var page = template.Must(template.New("sweep").Funcs(template.FuncMap{"ms": output.Millis, "sales": sales}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>flashsale hot-key sweep</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 3px 7px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.small { font-size: 12px; color: #555; }
</style>
</head>
<body>
<h1>flashsale hot-key sweep</h1>
<p class="small">{{.R.Started.Format "2006-01-02 15:04:05"}} · one SKU that never sells out · {{.R.WorkMS}} ms of work per critical section ·
{{.R.Duration}} per rate · lock TTL {{.R.LockTTL}} · lock wait {{.R.LockWait}} · {{.R.Instances}} app instances · {{.R.Nodes}} Redis nodes · {{.R.Database}}{{if .R.Batch}} · orders batched under one lease{{end}} ·
load average {{.R.LoadBefore}} before, {{.R.LoadAfter}} after{{with .R.Command}}<br>command: <code>{{.}}</code>{{end}}</p>
<table>
<tr><th rowspan="2">variant</th>{{range .R.Rates}}<th colspan="6">{{.}}/s offered</th>{{end}}</tr>
<tr>{{range .R.Rates}}<th>sent/s</th><th>sales/s</th><th>% 503</th><th>p50</th><th>p99</th><th>late</th>{{end}}</tr>
{{range .Rows}}<tr><th>{{.Variant}}</th>{{range .Steps}}{{if .}}<td class="num">{{printf "%.0f" .Summary.Sent}}</td><td class="num">{{sales .}}</td><td class="num">{{printf "%.0f" .Unavailable}} %</td><td class="num">{{ms .Summary.P50}}</td><td class="num">{{ms .Summary.P99}}</td><td class="num">{{.Late}}</td>{{else}}<td colspan="6">error</td>{{end}}{{end}}</tr>
{{end}}</table>
{{range .R.Capacity}}<p><b>{{.Line}}</b></p>
{{end}}<p class="small">{{.R.LatencyNote}}.</p>
{{range .Spikes}}<p>{{.}}</p>
{{end}}{{.Sales}}
{{.P99}}
</body>
</html>
`))

// row is one row of the report's table: a variant, or the bare exchange,
// with its step at every rate, nil where the step failed.
type row struct {
	Variant string
	Steps   []*Step
}

// rows are the table's rows: the bare exchange first, when it ran, then
// every variant.
func (r *Report) rows() []row {
	var rows []row
	if len(r.Bare) == len(r.Rates) {
		rw := row{Variant: Bare}
		for i := range r.Bare {
			rw.Steps = append(rw.Steps, ok(&r.Bare[i]))
		}
		rows = append(rows, rw)
	}
	for vi, v := range r.Variants {
		rw := row{Variant: v}
		for ri := range r.Rates {
			rw.Steps = append(rw.Steps, ok(r.at(vi, ri)))
		}
		rows = append(rows, rw)
	}
	return rows
}

// sales is a step's sales/s as the table shows it: a dash for the bare
// exchange, which sells nothing by design.
func sales(st *Step) string {
	if st.Variant == Bare {
		return "—"
	}
	return fmt.Sprintf("%.0f", st.Sales)
}

// ok is st, or nil when it failed.
func ok(st *Step) *Step {
	if st != nil && st.Err != "" {
		return nil
	}
	return st
}

// WriteHTML writes the self-contained HTML report.
func (r *Report) WriteHTML(w io.Writer) error {
	rows := r.rows()
	var spikes []string
	for _, sp := range r.Spikes {
		spikes = append(spikes, spikeLine(sp))
	}
	return page.Execute(w, map[string]any{
		"R":      r,
		"Rows":   rows,
		"Spikes": spikes,
		"Sales":  template.HTML(r.SalesChart()), // built by lineChart, every name escaped
		"P99":    template.HTML(r.P99Chart()),
	})
}
