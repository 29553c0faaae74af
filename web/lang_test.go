package web

import (
	"encoding/json"
	"flashsale/curriculum"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The pages say everything in English and in Chinese. Their English is
// written where it is shown: an element marked data-t (its text), an
// attribute that data-ta names, or a t("…") in a script; static/zh.json holds
// the Chinese of each. These tests read the files as they are.

var (
	// tCall is a string the scripts translate: the first argument of t().
	tCall = regexp.MustCompile(`\bt\(\s*"((?:[^"\\]|\\.)*)"`)
	// markedText is the text of an element marked data-t (no child tags).
	markedText = regexp.MustCompile(`<[a-z0-9]+\b[^>]*\sdata-t(?:\s[^>]*)?>([^<]*)<`)
	// markedAttrs is a tag with data-ta, the attributes it names.
	markedAttrs = regexp.MustCompile(`<[a-z0-9]+\b[^>]*\sdata-ta="([^"]*)"[^>]*>`)
	// placeholder is a {name} the scripts fill in.
	placeholder = regexp.MustCompile(`\{\w+\}`)
)

// pageStrings is every English string the pages and scripts show, from the
// files under static/.
func pageStrings(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{} // string → where
	files, err := filepath.Glob(filepath.Join("static", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		switch filepath.Ext(f) {
		case ".js":
			for _, m := range tCall.FindAllStringSubmatch(src, -1) {
				var s string
				if err := json.Unmarshal([]byte(`"`+m[1]+`"`), &s); err != nil {
					t.Errorf("%s: t(%q) is not a plain string: %v", f, m[1], err)
					continue
				}
				found[s] = f
			}
		case ".html":
			for _, m := range markedText.FindAllStringSubmatch(src, -1) {
				found[strings.Join(strings.Fields(html.UnescapeString(m[1])), " ")] = f
			}
			for _, m := range markedAttrs.FindAllStringSubmatch(src, -1) {
				for _, name := range strings.Fields(m[1]) {
					v := regexp.MustCompile(`\s` + regexp.QuoteMeta(name) + `="([^"]*)"`).FindStringSubmatch(m[0])
					if v == nil {
						t.Errorf("%s: data-ta names %s, which the tag does not have: %s", f, name, m[0])
						continue
					}
					found[html.UnescapeString(v[1])] = f
				}
			}
		}
	}
	return found
}

func readZh(t *testing.T) zhStrings {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("static", "zh.json"))
	if err != nil {
		t.Fatal(err)
	}
	var zh zhStrings
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&zh); err != nil {
		t.Fatalf("static/zh.json: %v", err)
	}
	return zh
}

// Every string the pages show has its Chinese, and every Chinese is of a
// string they show: one language only fails, either way round. The Chinese
// fills the same {names} and is Chinese.
func TestEveryStringInBothLanguages(t *testing.T) {
	en := pageStrings(t)
	zh := readZh(t)
	if len(en) < 100 {
		t.Fatalf("found only %d strings in the pages; is the pattern still right?", len(en))
	}
	for s, where := range en {
		c, ok := zh.Strings[s]
		switch {
		case !ok:
			t.Errorf("%s shows %q, which has no Chinese in static/zh.json", where, s)
			continue
		case strings.TrimSpace(c) == "":
			t.Errorf("the Chinese of %q is empty", s)
		}
		if !slices.Equal(sortedAll(placeholder, s), sortedAll(placeholder, c)) {
			t.Errorf("%q fills %v, its Chinese %q fills %v", s, sortedAll(placeholder, s), c, sortedAll(placeholder, c))
		}
		if hasLetters(s) && !hasHan(c) && !kept(c) {
			t.Errorf("the Chinese of %q is %q, with no Chinese in it", s, c)
		}
	}
	for s := range zh.Strings {
		if _, ok := en[s]; !ok {
			t.Errorf("static/zh.json has the Chinese of %q, which no page or script shows", s)
		}
	}
}

// Every error code the API answers with has its Chinese: the pages show it
// in place of the server's English message.
func TestEveryErrorCodeInChinese(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "handlers", "errors.go"))
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)^\t"([a-z_]+)":\s+\{status:`).FindAllStringSubmatch(string(b), -1)
	if len(codes) < 20 {
		t.Fatalf("found only %d error codes in handlers/errors.go; is the pattern still right?", len(codes))
	}
	zh := readZh(t)
	seen := map[string]bool{}
	for _, m := range codes {
		seen[m[1]] = true
		if c := zh.Errors[m[1]]; !hasHan(c) {
			t.Errorf("error code %s: no Chinese in static/zh.json (%q)", m[1], c)
		}
	}
	for code := range zh.Errors {
		if !seen[code] {
			t.Errorf("static/zh.json has the Chinese of error code %s, which the API does not answer with", code)
		}
	}
}

// The pages carry no English outside what they translate: a text between
// tags that is not marked data-t is a name (a rung, a scenario, a number),
// never words.
func TestNoUnmarkedWords(t *testing.T) {
	names := map[string]bool{"flashsale": true, "中文": true}
	for _, n := range curriculum.Names() {
		names[n] = true
	}
	text := regexp.MustCompile(`(<[^>]*>)([^<]+)`)
	for _, f := range []string{"index.html", "workshop.html"} {
		b, err := os.ReadFile(filepath.Join("static", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range text.FindAllStringSubmatch(string(b), -1) {
			tag, words := m[1], strings.TrimSpace(m[2])
			if words == "" || !hasLetters(words) || strings.HasPrefix(tag, "<script") || strings.HasPrefix(tag, "<style") {
				continue
			}
			if regexp.MustCompile(`\sdata-t[\s>]`).MatchString(tag) || names[words] || regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`).MatchString(words) {
				continue
			}
			t.Errorf("%s: %q after %s is shown untranslated; mark its element data-t", f, words, tag)
		}
	}
}

func sortedAll(re *regexp.Regexp, s string) []string {
	out := re.FindAllString(s, -1)
	slices.Sort(out)
	return out
}

func hasLetters(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < unicode.MaxASCII && unicode.IsLetter(r) }) >= 0
}

func hasHan(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.Is(unicode.Han, r) }) >= 0
}

// kept is a string that stays as it is in Chinese: units and short marks
// ("req/s", "p50 ms").
func kept(s string) bool {
	return !regexp.MustCompile(`[A-Za-z]{2,}\s+[A-Za-z]{2,}\s+[A-Za-z]{2,}`).MatchString(s)
}
