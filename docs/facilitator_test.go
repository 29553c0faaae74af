package docs

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// labTables are the lab numbers in the first column of each of a page's
// Markdown tables whose rows start with one ("1", "8a", "4, 5"), table by
// table, in order.
func labTables(md string) [][]string {
	lead := regexp.MustCompile(`^(\d+[a-z]?(?:, \d+[a-z]?)*)(?:\s|$)`)
	var out [][]string
	var cur []string
	inTable := false
	for line := range strings.Lines(md) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if cur != nil {
				out = append(out, cur)
			}
			cur, inTable = nil, false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		first := strings.TrimSpace(cells[0])
		if !inTable || strings.HasPrefix(first, "---") { // the header row, the rule under it
			inTable = true
			continue
		}
		if m := lead.FindStringSubmatch(first); m != nil {
			cur = append(cur, m[1])
		}
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

// column is every body cell of the column headed head, in the tables
// that have one.
func column(md, head string) []string {
	var out []string
	at := -1
	for line := range strings.Lines(md) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			at = -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch i := slices.Index(cells, head); {
		case i >= 0:
			at = i
		case at >= 0 && at < len(cells) && !strings.HasPrefix(cells[0], "---"):
			out = append(out, cells[at])
		}
	}
	return out
}

// The Chinese facilitator's page (docs/facilitator.zh.md, written by hand)
// follows the English one: the same labs in each of its tables (the
// agenda, what to say, the numbers that vary, what to say when a cell
// holds), every command word for word, and one question for the room per
// lab, in Chinese.
func TestChineseFacilitatorFollowsTheEnglish(t *testing.T) {
	en, zh := read(t, "docs/facilitator.md"), read(t, "docs/facilitator.zh.md")
	te, tz := labTables(en), labTables(zh)
	if len(te) < 4 {
		t.Fatalf("found %d tables of labs in docs/facilitator.md, want the agenda, what to say, the numbers that vary and what to say when it holds", len(te))
	}
	if !slices.EqualFunc(te, tz, slices.Equal) {
		t.Errorf("the Chinese facilitator's tables have the labs\n%v\nthe English one's\n%v", tz, te)
	}
	ce, cz := slices.Compact(slices.Sorted(slices.Values(commands(en)))), slices.Compact(slices.Sorted(slices.Values(commands(zh))))
	if len(ce) < 3 {
		t.Fatalf("found only %d commands in docs/facilitator.md; the pattern no longer finds them", len(ce))
	}
	for _, c := range ce {
		if !slices.Contains(cz, c) {
			t.Errorf("docs/facilitator.zh.md lacks the command %q of docs/facilitator.md", c)
		}
	}
	for _, c := range cz {
		if !slices.Contains(ce, c) {
			t.Errorf("docs/facilitator.zh.md gives the command %q, which docs/facilitator.md does not", c)
		}
	}
	qe, qz := column(en, "ask the room"), column(zh, "问大家")
	if len(qe) < 15 {
		t.Fatalf("found only %d questions for the room in docs/facilitator.md; is the column still \"ask the room\"?", len(qe))
	}
	if len(qz) != len(qe) {
		t.Errorf("docs/facilitator.zh.md asks the room %d questions, docs/facilitator.md %d", len(qz), len(qe))
	}
	for _, q := range qz {
		if !strings.ContainsFunc(q, isHan) || !strings.HasPrefix(q, "“") {
			t.Errorf("docs/facilitator.zh.md: %q is not a question in Chinese, quoted “…”", q)
		}
	}
}

func isHan(r rune) bool { return unicode.Is(unicode.Han, r) }
