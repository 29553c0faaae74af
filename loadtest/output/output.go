// Package output is what the load runner's reports share: writing a
// report's files, the way durations and counts are printed, and the pieces
// of the standalone SVG charts (scale, colours, escaping).
package output

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File is one file of a report: its name and what writes it.
type File struct {
	Name  string
	Write func(io.Writer) error
}

// SVG is a File's writer for a chart drawn as a string.
func SVG(draw func() string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, draw())
		return err
	}
}

// JSON writes v as indented JSON.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteFiles creates dir and writes every file into it, stopping at the
// first that fails.
func WriteFiles(dir string, files ...File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.Name), f.Write); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// FileName turns a variant name into a file name ("lua+fence" → "lua-fence").
func FileName(variant string) string { return strings.ReplaceAll(variant, "+", "-") }

// Millis prints a latency: "-" for none, a tenth of a millisecond below
// 10ms, whole milliseconds above.
func Millis(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
}

// Counts lists counts by name as "name n", most frequent first, ties by
// name.
func Counts[N int | uint64](m map[string]N) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// Colors tell the series of a chart apart.
var Colors = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"}

// Color is the colour of the i-th series.
func Color(i int) string { return Colors[i%len(Colors)] }

// NiceScale rounds peak up to a readable axis maximum and tick step.
func NiceScale(peak float64) (max, step float64) {
	if peak <= 0 {
		return 1, 1
	}
	raw := peak / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	step = math.Max(step, 1)
	return math.Ceil(peak/step) * step, step
}

// Num prints a chart's number as short as it goes.
func Num(v float64) string { return fmt.Sprintf("%g", v) }

// Esc escapes text for HTML and SVG.
func Esc(s string) string { return template.HTMLEscapeString(s) }

// OpenSVG starts a standalone SVG chart of the given size with its title,
// on a white ground; the caller draws the rest and closes it with </svg>.
func OpenSVG(b *strings.Builder, width, height, left float64, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(b, `<text x="%.0f" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, Esc(title))
}

// GridY draws the horizontal grid lines and their labels from 0 to max,
// every step, between x0 and x1; y maps a value to its height.
func GridY(b *strings.Builder, max, step, x0, x1 float64, y func(float64) float64) {
	for v := 0.0; v <= max+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, x0, x1, y(v), y(v))
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0-6, y(v), Num(v))
	}
}
