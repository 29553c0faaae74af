package docs

import (
	"regexp"
	"strings"
	"testing"
)

// What a reviewer or a facilitator once found wrong in the papers, so that
// it does not come back: each case a file, a pattern it must not match (or
// must), and why.
func TestWordingThatWasFixed(t *testing.T) {
	for _, c := range []struct {
		file, pattern string
		must          bool
		why           string
	}{
		// The Chinese handout: terms a Chinese reader takes the wrong way.
		{"docs/handout.zh.md", `[^“]死锁[^”（]`, false, "死锁 is a deadlock; a lock nobody can take is 卡死的锁 (quote “死锁” as the articles' word)"},
		{"docs/handout.zh.md", `卡死的锁`, true, "a stuck lock is 卡死的锁"},
		{"docs/handout.zh.md", `围栏令牌[^\n]*防护令牌|防护令牌[^\n]*围栏令牌`, true, "围栏令牌 and 防护令牌 beside 栅栏令牌, the names readers may know"},
		{"docs/handout.zh.md", `应答`, false, "an HTTP reply is a 响应"},
		{"docs/handout.zh.md", `丢更新`, false, "one term for a lost update: 更新丢失"},
		{"docs/handout.zh.md", `绝不不安全|一级锁|原样|商店|行数得到`, false, "wordings the reviewer found unnatural or misleading"},
		{"docs/handout.md", `faults of Labs 6–8`, false, "Lab 8a runs the faults of Labs 7 and 8"},
		{"docs/handout.zh.md", `Lab 6–8 的同样故障`, false, "Lab 8a runs the faults of Labs 7 and 8"},
		// The facilitator's papers.
		{"docs/labs/08a-article-and-library.md", `only yes or no`, false, "the article's acquire returns the nodes it won too"},
		{"docs/facilitator.md", `settle in`, false, "the opening follows Lab 0's quick pre-flight, as the run sheet places it"},
		{"docs/facilitator.md", `(?m)^\| 8a `, true, "the agenda, what to say and what to say when it holds each have Lab 8a"},
		{"docs/facilitator.md", `handout\.zh\.md`, true, "the facilitator's papers point to the Chinese handout"},
		{"docs/runsheet.md", `handout\.zh\.md`, true, "the facilitator's papers point to the Chinese handout"},
		{"docs/facilitator.md", `Neither conceded\.`, false, "antirez conceded the monotonic clock (sources.md, row 22)"},
		// Kleppmann at his strongest; the model's boundary is antirez's reading.
		{"docs/runsheet.md", `(?s)split network are\s+inside it\.`, false, "inside Redlock's model is antirez's reading, not a fact"},
		{"docs/runsheet.md", `antirez's reading`, true, "inside Redlock's model is antirez's reading"},
		{"docs/labs/10-timing.md", `(?s)A reply that comes late\*\* is inside it, by the Redis page's check \(and\s+antirez's reading.*A network split\*\* is inside it too, by the same reading`, true, "both the late reply and the split are inside the model by antirez's reading"},
		{"docs/sources.md", `(?s)## The debate.*The clock on node C jumps forward.*## Claims`, true, "Kleppmann's first example, the clock jump, is in his side of the debate"},
	} {
		text := read(t, c.file)
		if c.file == "docs/runsheet.md" && strings.Contains(c.pattern, "split") {
			text = strings.Join(strings.Fields(text), " ")
			c.pattern = strings.ReplaceAll(c.pattern, `\s+`, " ")
		}
		if m := regexp.MustCompile(c.pattern).FindString(text); (m != "") != c.must {
			if c.must {
				t.Errorf("%s does not match %q: %s", c.file, c.pattern, c.why)
			} else {
				t.Errorf("%s says %q again: %s", c.file, m, c.why)
			}
		}
	}
	// The close ends on the system model at Kleppmann's strongest: his
	// synchronous-model claim and the clock jump the room saw, not the
	// network delay the room saw redlock hold under.
	for _, f := range []string{"docs/runsheet.md", "docs/runsheet.zh.md"} {
		md := read(t, f)
		i := strings.LastIndex(md, "**1:12–1:17")
		if i < 0 {
			t.Errorf("%s: no close at 1:12–1:17", f)
			continue
		}
		close, _, _ := strings.Cut(md[i:], "**1:17")
		flat := strings.Join(strings.Fields(close), " ")
		if strings.Contains(flat, "A long network delay") || !strings.Contains(flat, "synchronous* system model") || !strings.Contains(flat, "The clock on node C jumps forward") {
			t.Errorf("%s: the close should set Kleppmann's synchronous-model claim and the clock jump against antirez, not the network delay:\n%s", f, close)
		}
	}
}
