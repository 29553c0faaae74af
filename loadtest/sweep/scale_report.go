package sweep

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"flashsale/loadtest/output"
)

// point returns the point of variant with batch on db at the given axis
// values, or nil.
func (r *ScaleReport) point(db string, skus, instances, nodes int, variant string, batch bool) *Point {
	for i := range r.Points {
		p := &r.Points[i]
		if p.Database == db && p.SKUs == skus && p.Instances == instances && p.Nodes == nodes && p.Variant == variant && p.Batch == batch {
			return p
		}
	}
	return nil
}

// ceiling is the store's writes/s on db at skus products, NaN if not
// measured.
func (r *ScaleReport) ceiling(db string, skus int) float64 {
	for _, c := range r.Ceilings {
		if c.Database == db && c.SKUs == skus {
			return c.Writes
		}
	}
	return math.NaN()
}

// Plot is one of the scale run's pictures: the file it is written to and
// the figure drawn there.
type Plot struct {
	File   string
	Figure Figure
}

// axis is one plot's x axis: its name, its values, and where each value
// puts a point.
type axis struct {
	file, title, label string
	db                 string
	values             []int
	at                 func(v int) (skus, instances, nodes int)
	variants           []string
}

// axes are the run's plots: sales and p99 by hot SKUs on each database,
// by app instances and by Redis nodes on the first.
func (r *ScaleReport) axes() []axis {
	var out []axis
	for _, db := range r.Databases {
		out = append(out, axis{file: "scale-skus-" + strings.ToLower(db) + ".svg", title: "by hot SKUs, " + db, label: "hot SKUs", db: db,
			values: r.SKUs, at: func(v int) (int, int, int) { return v, baseInstances, baseNodes }, variants: r.Variants})
	}
	if len(r.Databases) == 0 {
		return out
	}
	first := r.Databases[0]
	out = append(out, axis{file: "scale-instances.svg", title: fmt.Sprintf("by app instances, %d hot SKU, %s", baseSKUs, first), label: "app instances (processes)", db: first,
		values: r.Instances, at: func(v int) (int, int, int) { return baseSKUs, v, baseNodes }, variants: r.Variants})
	voting := quorumOnly(r.Variants)
	out = append(out, axis{file: "scale-nodes.svg", title: fmt.Sprintf("by Redis nodes, %d hot SKU, %s", baseSKUs, first), label: "Redis nodes", db: first,
		values: r.Nodes, at: func(v int) (int, int, int) { return baseSKUs, baseInstances, v }, variants: voting})
	return out
}

// Plots are the run's pictures, each with two panels (sales/s with the
// store's ceiling as its limit line, and p99) and the command, date and
// machine under them.
func (r *ScaleReport) Plots() []Plot {
	var plots []Plot
	for _, a := range r.axes() {
		var labels []string
		limit := make([]float64, len(a.values))
		for i, v := range a.values {
			labels = append(labels, strconv.Itoa(v))
			skus, _, _ := a.at(v)
			limit[i] = r.ceiling(a.db, skus)
		}
		sales := Panel{Title: "sales/s", XLabel: a.label, X: labels, Limit: limit, LimitName: "store ceiling (no lock)"}
		p99 := Panel{Title: "p99 latency, ms", XLabel: a.label, X: labels}
		for vi, v := range a.variants {
			for _, batch := range r.Batch {
				name := v
				if batch {
					name += " -batch"
				}
				s, t := Series{Name: name, Color: output.Color(vi), Dashed: batch}, Series{Name: name, Color: output.Color(vi), Dashed: batch}
				for _, x := range a.values {
					skus, inst, nodes := a.at(x)
					p := r.point(a.db, skus, inst, nodes, v, batch)
					if p == nil || p.Step.Err != "" {
						s.Y, t.Y = append(s.Y, math.NaN()), append(t.Y, math.NaN())
						continue
					}
					s.Y = append(s.Y, p.Step.Sales)
					t.Y = append(t.Y, float64(p.Step.Summary.P99)/float64(time.Millisecond))
				}
				sales.Series, p99.Series = append(sales.Series, s), append(p99.Series, t)
			}
		}
		plots = append(plots, Plot{File: a.file, Figure: Figure{
			Title: fmt.Sprintf("flashsale %s: %d req/s offered", a.title, r.Rate), Panels: []Panel{sales, p99}, Caption: r.caption()}})
	}
	return plots
}

// caption is the lines under every plot: the command, the date, the
// machine.
func (r *ScaleReport) caption() []string {
	cmd := r.Command
	if cmd == "" {
		cmd = "(command not recorded)"
	}
	return []string{
		"command: " + cmd,
		fmt.Sprintf("run %s–%s UTC, %v a point, %d ms of work per sale, lock wait %v; store ceiling: %s",
			r.Started.UTC().Format("2006-01-02 15:04"), r.Finished.UTC().Format("15:04"), r.Duration, r.WorkMS, r.LockWait, CeilingCommand),
		fmt.Sprintf("machine: %s; load average %s before, %s after", r.Machine, r.LoadBefore, r.LoadAfter),
	}
}

// WriteText writes one table per plot: sales/s and p99 of every series at
// every value of the axis, the store's ceiling under them, then every
// point that failed or lost updates.
func (r *ScaleReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "flashsale scale run: %d req/s offered for %v a point\n", r.Rate, r.Duration)
	for _, line := range r.caption() {
		fmt.Fprintln(&b, line)
	}
	for _, p := range r.Plots() {
		sales, p99 := p.Figure.Panels[0], p.Figure.Panels[1]
		fmt.Fprintf(&b, "\n%s (%s)\n\n| sales/s (p99) | %s |\n|---|%s\n", p.Figure.Title, p.File, strings.Join(sales.X, " | "), strings.Repeat("---|", len(sales.X)))
		for i, s := range sales.Series {
			fmt.Fprintf(&b, "| %s |", s.Name)
			for j, v := range s.Y {
				if math.IsNaN(v) {
					fmt.Fprint(&b, " error |")
					continue
				}
				fmt.Fprintf(&b, " %.0f (%.0f ms) |", v, p99.Series[i].Y[j])
			}
			fmt.Fprintln(&b)
		}
		fmt.Fprint(&b, "| store ceiling |")
		for _, v := range sales.Limit {
			fmt.Fprintf(&b, " %.0f |", v)
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintln(&b)
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "environment error: %s\n", e)
	}
	for _, p := range r.Points {
		st := p.Step
		var notes []string
		if st.Err != "" {
			notes = append(notes, "error: "+st.Err)
		}
		if st.LostUpdates > 0 {
			notes = append(notes, fmt.Sprintf("%d lost updates", st.LostUpdates))
		}
		if c := st.Cores; c != nil {
			notes = append(notes, fmt.Sprintf("cores: apps %.2f, Redis nodes %.2f, runner %.2f", c.Apps, c.Nodes, c.Runner))
			if st.Sales > 0 {
				notes = append(notes, fmt.Sprintf("CPU per sale: apps %.2f ms, nodes %.2f ms", 1000*c.Apps/st.Sales, 1000*c.Nodes/st.Sales))
			}
		}
		if st.Hold > 0 {
			notes = append(notes, "hold "+output.Millis(st.Hold))
		}
		notes = append(notes, fmt.Sprintf("sent %.0f/s, %.0f %% 503", st.Summary.Sent, st.Unavailable))
		fmt.Fprintf(&b, "  %s, %d apps, %d nodes, %d SKUs, %s batch=%v: %s\n", p.Database, p.Instances, p.Nodes, p.SKUs, p.Variant, p.Batch, strings.Join(notes, "; "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// scalePage is the self-contained HTML report of a scale run.
var scalePage = template.Must(template.New("scale").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>flashsale scale run</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
pre { font-size: 12px; }
figure { margin: 1.5em 0; }
figcaption { font-size: 12px; color: #555; }
</style>
</head>
<body>
<h1>flashsale scale run</h1>
{{range .Plots}}<figure>{{.SVG}}<figcaption>{{range .Caption}}{{.}}<br>{{end}}</figcaption></figure>
{{end}}<pre>{{.Text}}</pre>
</body>
</html>
`))

// WriteHTML writes the self-contained HTML report: every plot, with the
// command, date and machine under it, then the text report.
func (r *ScaleReport) WriteHTML(w io.Writer) error {
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		return err
	}
	type plot struct {
		SVG     template.HTML
		Caption []string
	}
	var plots []plot
	for _, p := range r.Plots() {
		plots = append(plots, plot{SVG: template.HTML(p.Figure.SVG()), Caption: p.Figure.Caption}) // drawn by Figure.SVG, every name escaped
	}
	return scalePage.Execute(w, map[string]any{"Plots": plots, "Text": text.String()})
}

// WriteFiles writes scale.txt, scale.json, scale.html and every plot into
// dir.
func (r *ScaleReport) WriteFiles(dir string) error {
	files := []output.File{
		{Name: "scale.txt", Write: r.WriteText},
		{Name: "scale.json", Write: func(w io.Writer) error { return output.JSON(w, r) }},
		{Name: "scale.html", Write: r.WriteHTML},
	}
	return output.WriteFiles(dir, append(files, r.plotFiles()...)...)
}

// WritePlots writes every plot, and nothing else, into dir.
func (r *ScaleReport) WritePlots(dir string) error { return output.WriteFiles(dir, r.plotFiles()...) }

// plotFiles are the plots as files.
func (r *ScaleReport) plotFiles() []output.File {
	var files []output.File
	for _, p := range r.Plots() {
		files = append(files, output.File{Name: p.File, Write: output.SVG(p.Figure.SVG)})
	}
	return files
}

// ReadScale reads a scale run's scale.json, to draw its plots again.
func ReadScale(path string) (*ScaleReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r ScaleReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
