package loadtest

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"flashsale/loadtest/output"
	"flashsale/loadtest/traffic"
)

// Metric is a per-cell figure a chart can show.
type Metric struct {
	Name  string
	Value func(*Cell) float64
}

// Metrics the report charts.
var (
	MetricOversold = Metric{"oversold units", func(c *Cell) float64 { return float64(c.Audit.OversoldUnits) }}
	MetricLost     = Metric{"lost updates", func(c *Cell) float64 { return float64(c.Audit.LostUpdates) }}
)

// Chart draws m for every cell as a standalone SVG bar chart: one group of
// bars per variant, one bar per scenario. Nothing is fetched to draw it, so
// it shows offline and in a README alike.
func (r *Report) Chart(m Metric) string {
	const (
		left, right, top, bottom = 56.0, 16.0, 40.0, 96.0
		barW, gap                = 13.0, 18.0
		plotH                    = 280.0
	)
	nsc := len(r.Scenarios)
	groupW := float64(nsc)*barW + gap
	width := math.Max(left+right+float64(len(r.Variants))*groupW, 520)
	// The legend wraps to as many rows as the scenario names need.
	type item struct{ x, y float64 }
	legend := make([]item, nsc)
	lx, row := left, 0
	for si, sc := range r.Scenarios {
		w := 24 + 6.5*float64(len(sc.Name))
		if lx+w > width-right && lx > left {
			lx, row = left, row+1
		}
		legend[si] = item{lx, float64(row)}
		lx += w
	}
	height := top + plotH + bottom + 16*float64(row)
	peak := 0.0
	for i := range r.Cells {
		peak = math.Max(peak, m.Value(&r.Cells[i]))
	}
	scaleMax, step := output.NiceScale(peak)
	y := func(v float64) float64 { return top + plotH - v/scaleMax*plotH }

	var b strings.Builder
	output.OpenSVG(&b, width, height, left, m.Name+" per lock variant and scenario (from the database audit)")
	output.GridY(&b, scaleMax, step, left, width-right, y)
	for vi, variant := range r.Variants {
		x0 := left + float64(vi)*groupW + gap/2
		for si, sc := range r.Scenarios {
			c := r.Cell(variant, sc.Name)
			if c == nil || c.Verdict == VerdictSkipped || c.Verdict == VerdictError {
				continue
			}
			v := m.Value(c)
			x := x0 + float64(si)*barW
			h := math.Max(v/scaleMax*plotH, 0)
			if v > 0 {
				h = math.Max(h, 2) // a small non-zero value must still be seen
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s × %s: %s %s (expected %s)</title></rect>`,
				x, top+plotH-h, barW-1, h, output.Color(si), output.Esc(variant), output.Esc(sc.Name), output.Num(v), output.Esc(m.Name), c.Expected)
			if v > 0 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="9" text-anchor="middle">%s</text>`, x+barW/2, top+plotH-h-3, output.Num(v))
			}
		}
		fmt.Fprintf(&b, `<text transform="translate(%.1f,%.1f) rotate(-30)" text-anchor="end">%s</text>`+"\n",
			x0+float64(nsc)*barW/2, top+plotH+14, output.Esc(variant))
	}
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, width-right, y(0), y(0))
	for si, sc := range r.Scenarios {
		it := legend[si]
		ly := top + plotH + bottom - 18 + 16*it.y
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`,
			it.x, ly-9, output.Color(si), it.x+13, ly, output.Esc(sc.Name))
	}
	b.WriteString("\n</svg>\n")
	return b.String()
}

// htmlPage is the self-contained report: inline CSS, inline SVG, and each
// of vegeta's latency plots (which carry their own scripts inline) in an
// iframe's srcdoc. Nothing is loaded from the network.
var htmlPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms": output.Millis,
	"mark": func(c *Cell) string {
		if c == nil {
			return "—"
		}
		return c.mark()
	},
	"class": func(v any) string {
		var c *Cell
		switch v := v.(type) {
		case *Cell:
			c = v
		case Cell:
			c = &v
		}
		if c == nil {
			return "na"
		}
		switch c.Verdict {
		case VerdictOK:
			return string(c.Seen)
		case VerdictSkipped:
			return "na"
		default:
			return "bad"
		}
	},
	"join":     strings.Join,
	"fired":    output.Counts[uint64],
	"codes":    output.Counts[int],
	"outcomes": func() []string { return traffic.Outcomes },
	"omission": traffic.OmissionNote,
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>flashsale load run</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 3px 7px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.holds { background: #e3f4e1; } td.breaks { background: #fde2d0; }
td.bad { background: #e8383d; color: #fff; font-weight: bold; } td.na { color: #999; }
.small { font-size: 12px; color: #555; }
td.why { min-width: 30em; }
iframe { width: 100%; height: 700px; border: 1px solid #ccc; }
</style>
</head>
<body>
<h1>flashsale load run</h1>
<p class="small">{{.R.Started.Format "2006-01-02 15:04:05"}} · {{.R.Settings.Rate}} req/s for {{.R.Settings.Duration}} per cell (cap {{.R.Settings.MaxRequests}} requests) ·
seed {{.R.Settings.Seed}} · lock TTL {{.R.Settings.LockTTL}} · {{.R.Settings.Instances}} app instances · {{.R.Settings.Nodes}} Redis nodes
{{with .R.Command}}<br>command: <code>{{.}}</code>{{end}}</p>
<p>Every figure comes from the database audit, the runner's own scan of the Redis nodes and vegeta's results; a cell
<b>breaks</b> when the audit shows overselling, lost updates, double-booked seats or stuck locks, or when the
audit and vegeta disagree about the orders. ✓ means the cell did what the curriculum (curriculum/table.go) expects.</p>
<p>The <b>linearizable</b> column is porcupine's verdict on the history the shoppers saw (every answer, with its call and
return times, and the stock and seat map read while the sale ran): a checker nobody here wrote. "unknown" means its check ran
out of time, never a pass. A history that is not linearizable links to porcupine's picture of it.</p>
<p><b>{{len .R.Cells}} cells: {{.R.Bugs}} bugs, {{.R.NoDemos}} no-demo, {{.R.Errors}} errors, {{.R.Skipped}} skipped, {{.R.Disagreements}} disagreements of the audit and porcupine the curriculum does not declare ({{.R.DeclaredDisagreements}} declared).</b>
{{with .R.RedlockVsNone}} Throughput of completed sales ({{.Scenario}}): redlock {{printf "%.1f" .OfRate}}/s vs none {{printf "%.1f" .BaseRate}}/s = <b>{{printf "%.2f" .Ratio}}×</b>.{{end}}</p>

<h2>Expected vs seen</h2>
<table>
<tr><th>variant</th>{{range .R.Scenarios}}<th>{{.Name}}</th>{{end}}</tr>
{{range $v := .R.Variants}}<tr><th>{{$v}}</th>{{range $.R.Scenarios}}{{$c := $.R.Cell $v .Name}}<td class="{{class $c}}">{{mark $c}}</td>{{end}}</tr>
{{end}}</table>

<h2>{{.Oversold.Name}}</h2>
{{.OversoldSVG}}
<h2>Lost updates</h2>
{{.LostSVG}}

<h2>Every cell</h2>
<table>
<tr><th>variant</th><th>scenario</th><th>expected</th><th>seen</th><th>verdict</th><th>linearizable</th><th>hot sold / initial</th><th>oversold</th><th>lost updates</th>
<th>double-booked</th><th>stuck locks</th><th>201</th><th>409</th><th>503</th><th>other</th><th>sales/s</th><th>p50</th><th>p99</th><th>why</th></tr>
{{range .R.Cells}}<tr><td>{{.Variant}}</td><td>{{.Scenario}}</td><td>{{.Expected}}</td><td class="{{class .}}">{{.Seen}}</td><td>{{.Verdict}}</td>
<td>{{if .HistoryFile}}<a href="{{.HistoryFile}}">{{.LinearMark}}</a>{{else}}{{.LinearMark}}{{end}}{{with .Linear}}<br><span class="small">{{.Ops}} ops, {{ms .Took}}</span>{{end}}</td>
<td class="num">{{.SoldOfInitial}}</td><td class="num">{{.Audit.OversoldUnits}}</td><td class="num">{{.Audit.LostUpdates}}</td>
<td class="num">{{.Audit.DoubleBookedSeats}}</td><td class="num">{{.StuckLocks}}</td><td class="num">{{.Summary.Counts.Created}}</td>
<td class="num">{{.Summary.Counts.Conflict}}</td><td class="num">{{.Summary.Counts.Unavailable}}</td><td class="num">{{.Summary.Counts.Other}}</td>
<td class="num">{{printf "%.1f" .Summary.SalesPerSecond}}</td><td class="num">{{ms .Summary.P50}}</td><td class="num">{{ms .Summary.P99}}</td>
<td class="small why">{{with .Disagreement}}<b>disagreement: {{.}}</b><br>{{end}}{{join .Reasons "; "}}{{with codes .Summary.Counts.ByError}}<br>answers: {{.}}{{end}}{{with fired .FaultsFired}}<br>faults fired: {{.}}{{end}}{{with .Notes}}<details><summary>{{len .}} notes</summary>{{range .}}{{.}}<br>{{end}}</details>{{end}}</td></tr>
{{end}}</table>

<h2>Latency by outcome</h2>
<p class="small">{{omission .R.Settings.MaxWorkers}}.</p>
<table>
<tr><th>variant</th><th>scenario</th><th>outcome</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>
{{range $c := .R.Cells}}{{range $o := outcomes}}{{with index $c.Summary.Latency $o}}{{if .Count}}<tr><td>{{$c.Variant}}</td><td>{{$c.Scenario}}</td><td>{{$o}}</td>
<td class="num">{{.Count}}</td><td class="num">{{ms .P50}}</td><td class="num">{{ms .P90}}</td><td class="num">{{ms .P99}}</td><td class="num">{{ms .P999}}</td><td class="num">{{ms .Max}}</td></tr>
{{end}}{{end}}{{end}}{{end}}</table>

<h2>Scenarios</h2>
<ul>{{range .R.Scenarios}}<li><b>{{.Name}}</b>: {{.Doc}}{{with .Nodes}} — {{.Steps}}{{end}}</li>{{end}}</ul>

<h2>Latency (vegeta plot, one series per variant)</h2>
{{range .Plots}}<details{{if .Open}} open{{end}}><summary>{{.Scenario}}</summary><iframe title="latency, {{.Scenario}}" srcdoc="{{.HTML}}"></iframe></details>
{{end}}
{{range .R.Notes}}<p class="small">note: {{.}}</p>{{end}}
</body>
</html>
`))

type plotView struct {
	Scenario string
	HTML     string
	Open     bool
}

// WriteHTML writes the self-contained HTML report.
func (r *Report) WriteHTML(w io.Writer) error {
	var plots []plotView
	for _, sc := range r.Scenarios {
		if p, ok := r.plots[sc.Name]; ok {
			plots = append(plots, plotView{Scenario: sc.Name, HTML: string(p), Open: len(plots) == 0})
		}
	}
	return htmlPage.Execute(w, map[string]any{
		"R":           r,
		"Oversold":    MetricOversold,
		"OversoldSVG": template.HTML(r.Chart(MetricOversold)), // built by Chart, every name escaped
		"LostSVG":     template.HTML(r.Chart(MetricLost)),
		"Plots":       plots,
	})
}
