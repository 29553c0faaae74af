package sweep

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// svgElement is one element of a drawn SVG: its name and attributes.
type svgElement struct {
	name  string
	attrs map[string]string
}

// elements parses svg as XML, failing the test where it is not well
// formed, and returns every element in document order.
func elements(t *testing.T, svg string) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	var out []svgElement
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			e := svgElement{name: se.Name.Local, attrs: map[string]string{}}
			for _, a := range se.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
		}
	}
}

// byClass are the elements named name whose class is class.
func byClass(els []svgElement, name, class string) []svgElement {
	var out []svgElement
	for _, e := range els {
		if e.name == name && e.attrs["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

// A figure is well-formed SVG with two axes per panel, one polyline per
// series and one for the limit, and every value where the axes put it:
// 0..100 on a 240-high panel whose top is at 48, three categories across
// 360 from the left edge at 56.
func TestFigureSVG(t *testing.T) {
	nan := math.NaN()
	panel := Panel{Title: "sales/s", XLabel: "hot SKUs", X: []string{"1", "10", "100"}, Limit: []float64{100, 90, 80}, LimitName: "store <ceiling>",
		Series: []Series{{Name: "lua", Color: "#000", Y: []float64{0, 50, 100}}, {Name: "redlock & co", Color: "#111", Dashed: true, Y: []float64{10, nan, 30}}}}
	other := panel
	other.Limit = nil
	fig := Figure{Title: "t", Panels: []Panel{panel, other}, Caption: []string{"command: go run ./x -scale", "machine: 2 cores"}}
	els := elements(t, fig.SVG())
	if els[0].name != "svg" {
		t.Fatalf("root element %q, want svg", els[0].name)
	}
	if got := len(byClass(els, "line", "axis")); got != 4 {
		t.Errorf("%d axis lines, want 2 per panel, 4", got)
	}
	series := byClass(els, "polyline", "series")
	if len(series) != 4 {
		t.Fatalf("%d series polylines, want one per series per panel, 4", len(series))
	}
	if got := len(byClass(els, "polyline", "limit")); got != 1 {
		t.Errorf("%d limit polylines, want 1 (the second panel has none)", got)
	}
	if got, want := series[0].attrs["points"], "116.0,288.0 236.0,168.0 356.0,48.0"; got != want {
		t.Errorf("lua's points %q, want %q", got, want)
	}
	if got, want := series[1].attrs["points"], "116.0,264.0 356.0,216.0"; got != want {
		t.Errorf("the second series' points %q, want %q (the missing point left out)", got, want)
	}
	if series[1].attrs["stroke-dasharray"] == "" || series[0].attrs["stroke-dasharray"] != "" {
		t.Errorf("only the dashed series is dashed: %v, %v", series[0].attrs, series[1].attrs)
	}
	// The second panel sits one panel and one margin to the right.
	if got, want := series[2].attrs["points"], "532.0,288.0 652.0,168.0 772.0,48.0"; got != want {
		t.Errorf("second panel's points %q, want %q", got, want)
	}
}

// A scale report draws a plot per axis, one series per variant and batch
// setting, the store's ceiling as its limit, each point's figures where
// they belong, and the command under every plot.
func TestScalePlots(t *testing.T) {
	r := &ScaleReport{
		Started: time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC), Finished: time.Date(2026, 11, 28, 7, 15, 0, 0, time.UTC),
		Command: "go run ./loadtest/cmd/loadtest -scale", Machine: "2 cores", Rate: 1200, Duration: 3 * time.Second,
		Variants: []string{"lua", "redlock"}, SKUs: []int{1, 10}, Instances: []int{1, 3}, Nodes: []int{3, 5},
		Batch: []bool{false, true}, Databases: []string{"SQLite"},
		Ceilings: []Ceiling{{Database: "SQLite", SKUs: 1, Writes: 900}, {Database: "SQLite", SKUs: 10, Writes: 1100}},
	}
	add := func(skus, inst, nodes int, v string, batch bool, sales float64) {
		r.Points = append(r.Points, Point{Database: "SQLite", SKUs: skus, Instances: inst, Nodes: nodes, Variant: v, Batch: batch,
			Step: Step{Sales: sales}})
	}
	add(1, 3, 5, "lua", false, 400)
	add(10, 3, 5, "lua", false, 700)
	add(1, 1, 5, "lua", false, 450)
	add(1, 3, 3, "redlock", true, 800)
	plots := r.Plots()
	var files []string
	for _, p := range plots {
		files = append(files, p.File)
	}
	if got, want := strings.Join(files, " "), "scale-skus-sqlite.svg scale-instances.svg scale-nodes.svg"; got != want {
		t.Fatalf("plots %s, want %s", got, want)
	}
	skus := plots[0].Figure.Panels[0]
	if len(skus.Series) != 4 || skus.Series[0].Name != "lua" || skus.Series[1].Name != "lua -batch" {
		t.Fatalf("series of the SKU plot: %+v", skus.Series)
	}
	if skus.Series[0].Y[0] != 400 || skus.Series[0].Y[1] != 700 || !math.IsNaN(skus.Series[1].Y[0]) {
		t.Errorf("lua by SKUs %v, lua -batch %v", skus.Series[0].Y, skus.Series[1].Y)
	}
	if skus.Limit[0] != 900 || skus.Limit[1] != 1100 {
		t.Errorf("limit %v, want the ceilings 900, 1100", skus.Limit)
	}
	if inst := plots[1].Figure.Panels[0].Series[0].Y; inst[0] != 450 || inst[1] != 400 {
		t.Errorf("lua by instances %v, want 450 then the base point's 400", inst)
	}
	nodes := plots[2].Figure.Panels[0]
	if len(nodes.Series) != 2 || nodes.Series[1].Y[0] != 800 {
		t.Errorf("the node plot draws the voting variants only, redlock -batch at 3 nodes 800: %+v", nodes.Series)
	}
	for _, p := range plots {
		svg := p.Figure.SVG()
		elements(t, svg)
		if !strings.Contains(svg, "command: go run ./loadtest/cmd/loadtest -scale") || !strings.Contains(svg, "2026-11-28 07:00") {
			t.Errorf("%s does not say the command and the date under it", p.File)
		}
	}
}

// The store benchmark's output is read line by line, whatever the GOMAXPROCS
// suffix, and lines of other benchmarks are left alone.
func TestParseCeiling(t *testing.T) {
	out := "goos: linux\nBenchmarkStoreCeiling/sqlite/skus=1-2   \t 1344\t 1631713 ns/op\t 612.9 writes/s\n" +
		"BenchmarkStoreCeiling/postgres/skus=1000 \t 1377\t 1379843 ns/op\t 724.7 writes/s\nBenchmarkOther-2 1 2 ns/op\nPASS\n"
	got := parseCeiling(out)
	want := []Ceiling{{Database: "SQLite", SKUs: 1, Writes: 612.9}, {Database: "PostgreSQL", SKUs: 1000, Writes: 724.7}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("parseCeiling = %+v, want %+v", got, want)
	}
}
