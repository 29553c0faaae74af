package curriculum

import (
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"flashsale/inventory"
	"flashsale/lock/ladder"
)

// The table has a lesson for exactly the rungs lock declares, and Lessons
// lists them in lock's order.
func TestTableIsTheLadder(t *testing.T) {
	names := ladder.Names()
	for _, d := range inventory.Designs() {
		names = append(names, d.Name)
	}
	for name := range lessons {
		if !slices.Contains(names, name) {
			t.Errorf("the table has a lesson for %q, which is not a rung of lock's ladder", name)
		}
	}
	var got []string
	for _, l := range Lessons() {
		if _, ok := lessons[l.Name]; !ok {
			t.Errorf("%s: a rung of lock's ladder without a lesson in the table", l.Name)
		}
		if r, ok := ladder.Find(l.Name); ok && l.Rung.File != r.File {
			t.Errorf("%s: the lesson's rung is not lock's", l.Name)
		}
		got = append(got, l.Name)
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(names))) || !slices.Equal(got, Names()) {
		t.Errorf("Lessons() = %v, Names() = %v", got, names)
	}
	if len(lessons) != len(names) {
		t.Errorf("the table has %d lessons (%v), the ladder %d rungs", len(lessons), slices.Sorted(maps.Keys(lessons)), len(names))
	}
	for _, name := range names {
		if l, ok := Find(name); !ok || l.Name != name {
			t.Errorf("Find(%q) = %q, %v", name, l.Name, ok)
		}
	}
	if _, ok := Find("no-such-rung"); ok {
		t.Error("Find found a rung that is not in the ladder")
	}
}

// Every rung has its paragraph, and every paragraph is a rung's: a file
// under why/ named for no rung would never be shown.
func TestWhyFiles(t *testing.T) {
	files, err := fs.Glob(whyFiles, "why/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name, ok := strings.CutSuffix(strings.TrimPrefix(f, "why/"), ".md")
		if _, rung := Find(name); !ok || !rung {
			t.Errorf("%s is the paragraph of no rung", f)
		}
	}
	for _, l := range Lessons() {
		switch {
		case l.Why == "":
			t.Errorf("%s: no paragraph (why/%s.md)", l.Name, l.Name)
		case strings.Contains(l.Why, "\n") || strings.Contains(l.Why, "  "):
			t.Errorf("%s: the paragraph is not one line of text: %q", l.Name, l.Why)
		}
	}
}

// Every paragraph has its Chinese, and only a rung's paragraph has one: a
// room that reads Chinese sees no rung in English only. The Chinese names
// what the English names, as written: the scenarios, the files, the
// commands and the status codes stay as they are.
func TestWhyInChinese(t *testing.T) {
	files, err := fs.Glob(whyFiles, "why/zh/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name, _ := strings.CutSuffix(strings.TrimPrefix(f, "why/zh/"), ".md")
		if _, ok := Find(name); !ok {
			t.Errorf("%s is the Chinese paragraph of no rung", f)
		}
	}
	kept := regexp.MustCompile(`\([a-z]+(?:-[a-z]+)+\)|\b[\w+]+\.go\b|\b[A-Z]{3,}\b|\b[45]\d\d\b|\b[a-z]+_[a-z_]+\b`)
	han := regexp.MustCompile(`\p{Han}`)
	names := regexp.MustCompile(`\b(?:` + strings.Join(quoted(Names()), "|") + `)\b`)
	for _, l := range Lessons() {
		switch {
		case l.WhyZh == "":
			t.Errorf("%s: no Chinese paragraph (why/zh/%s.md)", l.Name, l.Name)
			continue
		case !han.MatchString(l.WhyZh):
			t.Errorf("%s: the Chinese paragraph has no Chinese in it", l.Name)
		case strings.Contains(l.WhyZh, "\n") || strings.Contains(l.WhyZh, "  "):
			t.Errorf("%s: the Chinese paragraph is not one line of text: %q", l.Name, l.WhyZh)
		}
		for _, word := range kept.FindAllString(l.Why, -1) {
			if word = strings.Trim(word, "()"); !strings.Contains(l.WhyZh, word) {
				t.Errorf("%s: the English names %q and the Chinese does not", l.Name, word)
			}
		}
		for _, rung := range names.FindAllString(l.Why, -1) {
			if !names.MatchString(l.WhyZh) || !strings.Contains(l.WhyZh, rung) {
				t.Errorf("%s: the English names the rung %s and the Chinese does not", l.Name, rung)
			}
		}
	}
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = regexp.QuoteMeta(n)
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) }) // lua+fence before lua
	return out
}
