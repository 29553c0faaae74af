package docs

import (
	"flashsale/curriculum"
	"flashsale/internal/testsupport"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// api.md's configuration table names every flag of `flashsale -h`, with its
// variable, and nothing else: a new flag cannot go undocumented, nor a
// removed one stay.
func TestAPIDocNamesEveryFlag(t *testing.T) {
	testsupport.Long(t, "builds every command to read its flags")
	table := section(read(t, "docs/api.md"), "Configuration")
	rows := regexp.MustCompile("(?m)^\\| `-([a-z][a-z0-9-]*)` \\| `(FLASHSALE_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(table, -1)
	if len(rows) == 0 {
		t.Fatal("api.md has no configuration table")
	}
	app, _ := binaries(t)
	fs := helpOf(t, app)
	documented := map[string]bool{}
	for _, r := range rows {
		documented[r[1]] = true
		if _, ok := fs.takesValue[r[1]]; !ok {
			t.Errorf("api.md documents -%s, which flashsale does not have", r[1])
		}
		if want := "FLASHSALE_" + strings.ToUpper(strings.ReplaceAll(r[1], "-", "_")); r[2] != want || !fs.env[r[2]] {
			t.Errorf("api.md gives -%s the variable %s; flashsale -h has %s: %v", r[1], r[2], want, fs.env[want])
		}
	}
	for name := range fs.takesValue {
		if name != "h" && !documented[name] {
			t.Errorf("flashsale has -%s, which api.md's configuration table does not document", name)
		}
	}
}

// The X-Lock-Variant list of POST /api/orders names every rung of the
// ladder, and nothing else.
func TestAPIDocNamesEveryVariant(t *testing.T) {
	m := regexp.MustCompile("optional headers `X-Lock-Variant` \\(([^)]*(?:\\([^)]*\\)[^)]*)*)\\)").FindStringSubmatch(read(t, "docs/api.md"))
	if m == nil {
		t.Fatal("api.md's POST /api/orders row has no X-Lock-Variant list")
	}
	var named []string
	for _, v := range regexp.MustCompile("`([a-z+-]+)`").FindAllStringSubmatch(m[1], -1) {
		named = append(named, v[1])
	}
	want := curriculum.Names()
	slices.Sort(named)
	slices.Sort(want)
	if !slices.Equal(named, want) {
		t.Errorf("api.md's X-Lock-Variant list is %v, the ladder %v", named, want)
	}
}
