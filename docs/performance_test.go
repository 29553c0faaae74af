package docs

import (
	"html"
	"regexp"
	"strings"
	"testing"
)

// Every plot docs/performance.md shows was drawn by the load runner's scale
// run, and says under it the command that drew it; the document names that
// command too, so the picture and the text cannot drift apart unnoticed.
func TestPerformancePlotsNameTheirCommand(t *testing.T) {
	doc := read(t, "docs/performance.md")
	shown := regexp.MustCompile(`\(img/(scale-[a-z-]+\.svg)\)`).FindAllStringSubmatch(doc, -1)
	if len(shown) == 0 {
		t.Fatal("docs/performance.md shows no plot of the scale run")
	}
	for _, m := range shown {
		svg := read(t, "docs/img/"+m[1])
		desc := regexp.MustCompile(`(?s)<desc>(.*?)</desc>`).FindStringSubmatch(svg)
		if desc == nil {
			t.Errorf("docs/img/%s has no caption: draw it with the scale run", m[1])
			continue
		}
		caption := html.UnescapeString(desc[1])
		cmd := regexp.MustCompile(`(?m)^command: (go run \./loadtest/cmd/loadtest -scale\b.*)$`).FindStringSubmatch(caption)
		if cmd == nil {
			t.Errorf("docs/img/%s names no -scale command: %q", m[1], caption)
			continue
		}
		if !strings.Contains(doc, cmd[1]) {
			t.Errorf("docs/performance.md does not name the command that drew docs/img/%s: %s", m[1], cmd[1])
		}
		if !regexp.MustCompile(`(?m)^run \d{4}-\d\d-\d\d `).MatchString(caption) || !strings.Contains(caption, "machine: ") {
			t.Errorf("docs/img/%s does not say when and on what machine it was measured: %q", m[1], caption)
		}
	}
}
