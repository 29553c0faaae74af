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
		{"docs/handout.zh.md", `其他数字全是`, false, "201, 409 and 503 are not 0 in a cell that holds: name the audit's four figures"},
		{"docs/labs/01-none.md", `every other figure 0`, false, "201, 409 and 503 are not 0 in a cell that holds: name the audit's four figures"},
		{"docs/handout.zh.md", `breaks 失守，holds 守住`, true, "the glossary gives the verdicts' one pair of Chinese words"},
		{"docs/handout.zh.md", `出错|扛住|扛得住`, false, "one pair of verdict words: 失守/守住"},
		{"docs/runsheet.zh.md", `出错|扛住|扛得住`, false, "one pair of verdict words: 失守/守住"},
		{"docs/facilitator.zh.md", `出错|扛住|扛得住|失效|梯子`, false, "one pair of verdict words: 失守/守住; the ladder is 阶梯"},
		{"docs/runsheet-3h.zh.md", `出错|扛住|扛得住|失效|梯子`, false, "one pair of verdict words: 失守/守住; the ladder is 阶梯"},
		{"docs/workshop-solutions.zh.md", `出错|扛住|扛得住|失效|梯子`, false, "one pair of verdict words: 失守/守住; the ladder is 阶梯"},
		// The Chinese run sheet, as a Chinese facilitator says it.
		{"docs/runsheet.zh.md", `没有红框的行|红框意味着`, false, "say: 确认没有任何一行带红框（红框表示与矩阵预期不符）"},
		{"docs/runsheet.zh.md", `看完一整天`, false, "say: 90 秒看完整场工作坊的主线"},
		{"docs/runsheet.zh.md", `要指出`, false, "say: 请大家看"},
		{"docs/runsheet.zh.md", `只跟它提到的东西有关`, false, "say: note 行只影响它点名的那一项"},
		{"docs/runsheet.zh.md", `梯子`, false, "the ladder is 阶梯 (完整阶梯, 运行整条阶梯); a rung is 梯级"},
		// The pages' Chinese.
		{"web/static/zh.json", `件剩余|——已售罄|锁持锁者|两可|更新的持锁者|梯子|座位一座两卖|失效`, false, "剩余 100 件，共 100 件; 0 件（已售罄）; 持锁者时间线; 都可能; 新的持锁者已经接手; 阶梯; 被重复预订; 失守"},
		{"web/static/store.js", "`, \\$\\{t\\(\"lock\"\\)\\}", false, "the order's confirmation takes its punctuation from the language: （订单 #4642，锁 lua+fence，栅栏令牌 1）"},
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
	// The why-texts in Chinese.
	for _, f := range glob(t, "curriculum/why/zh/*.md") {
		if m := regexp.MustCompile(`并肩进入|过期的库存|过期库存|数据比 TTL|只由刚好够多数派|失效|扛住`).FindString(read(t, f)); m != "" {
			t.Errorf("%s says %q again: 同时进入临界区; 写入基于旧库存算出的值; 数据存在还不到 TTL + drift; 恰好只拿到过半票数的租约; 失守/守住", f, m)
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
