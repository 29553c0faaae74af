package docs

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// runnerColumns are the columns of the load runner's big table, read from
// the code that prints it.
func runnerColumns(t *testing.T) []string {
	t.Helper()
	// The header may be written as string literals joined with +.
	m := regexp.MustCompile(`fmt\.Fprintln\(tw, ("variant\\t[^"]*"(?:\s*\+\s*"[^"]*")*)\)`).FindStringSubmatch(read(t, "loadtest/report_text.go"))
	if m == nil {
		t.Fatal("loadtest/report_text.go no longer prints its big table's header with fmt.Fprintln(tw, \"variant\\t…\")")
	}
	var joined strings.Builder
	for _, lit := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
		joined.WriteString(lit[1])
	}
	var out []string
	for c := range strings.SplitSeq(joined.String(), `\t`) {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// Both Chinese papers explain the runner's output from a real one: their
// block carries the big table's header as the runner prints it today, and
// every column, the why line, NO-DEMO and BUG, and the two verdicts (with
// the Chinese words 失守 and 守住) are explained.
func TestChineseOutputLegend(t *testing.T) {
	cols := runnerColumns(t)
	header := strings.Join(cols, " ")
	text := regexp.MustCompile("(?s)```text\n(.*?)```")
	for _, f := range []string{"docs/handout.zh.md", "docs/runsheet.zh.md"} {
		md := read(t, f)
		found := false
		for _, m := range text.FindAllStringSubmatch(md, -1) {
			for line := range strings.Lines(m[1]) {
				if strings.Join(strings.Fields(line), " ") == header {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("%s: no output block with the runner's header %q", f, header)
		}
		for _, c := range cols {
			if !strings.Contains(md, "| `"+c+"`") && !strings.Contains(md, " `"+c+"` ") {
				t.Errorf("%s: the legend does not explain the column `%s`", f, c)
			}
		}
		for _, s := range []string{"**`why` 行**", "`NO-DEMO`", "`BUG`", "`breaks` 即失守", "`holds` 即守住"} {
			if !strings.Contains(md, s) {
				t.Errorf("%s: the legend does not say %s", f, s)
			}
		}
	}
}

// The Chinese handout's Lab 15 reads the code the lab reads, by the same
// line ranges (TestLabReadsExist holds them to the code): the file to edit,
// its SPOT THE FLAW and FIX ME blocks, lua.go beside it; and it keeps the
// lab's rules: every checkpoint stays, restart go run ., pick attendee.
func TestChineseHandoutReadsLab15(t *testing.T) {
	var reads []readRef
	for _, l := range labs(t) {
		if strings.HasPrefix(l.title, "Lab 15 ") {
			reads = l.reads
		}
	}
	if len(reads) == 0 {
		t.Fatal("Lab 15 reads no code")
	}
	var body string
	for _, sec := range sections(read(t, "docs/handout.zh.md")) {
		if strings.HasPrefix(sec[0], "Lab 15 ") {
			body = sec[1]
		}
	}
	if body == "" {
		t.Fatal("docs/handout.zh.md has no Lab 15")
	}
	for _, r := range reads {
		if !saysRangeAs(body, r, "第 %d–%d 行") {
			t.Errorf("docs/handout.zh.md, Lab 15: does not say \"`%s` 第 %d–%d 行\"", r.file, r.from, r.to)
		}
		if r.file == "lock/ladder/attendee.go" && !strings.Contains(body, fmt.Sprintf("`%s`", r.marker)) {
			t.Errorf("docs/handout.zh.md, Lab 15: does not name the block `%s`", r.marker)
		}
	}
	flat := strings.Join(strings.Fields(body), " ")
	for _, s := range []string{"`checkpoint(ctx, …)`", "`go run .`", "`attendee`", "`lock/ladder/attendee.go`"} {
		if !strings.Contains(flat, s) {
			t.Errorf("docs/handout.zh.md, Lab 15: does not say %s", s)
		}
	}
}
