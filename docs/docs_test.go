package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"flashsale/internal/testsupport"
)

// root is the module root; line ranges and links are relative to it.
const root = ".."

func TestMain(m *testing.M) { os.Exit(testsupport.Main(m)) }

// read is the text of a file of the repository.
var read = testsupport.Read

// binaries are the storefront and the load runner, built once.
func binaries(t *testing.T) (app, runner string) {
	t.Helper()
	return testsupport.Binary(t, "."), testsupport.Binary(t, "./loadtest/cmd/loadtest")
}

// flagSet is what a binary's -h says: each flag, and whether it takes a
// value (a bool flag does not).
type flagSet struct {
	takesValue map[string]bool
	env        map[string]bool
}

func helpOf(t *testing.T, bin string) flagSet {
	t.Helper()
	out := testsupport.Help(t, bin)
	// flag.PrintDefaults writes "  -name type" for a flag with a value and
	// "  -name" (or "  -n<tab>usage") for a bool.
	fs := flagSet{takesValue: map[string]bool{"h": false}, env: map[string]bool{}}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)(?: (\w+))?`).FindAllStringSubmatch(string(out), -1) {
		fs.takesValue[m[1]] = m[2] != ""
	}
	for _, m := range regexp.MustCompile(`FLASHSALE_[A-Z0-9_]+`).FindAllString(string(out), -1) {
		fs.env[m] = true
	}
	if len(fs.takesValue) < 5 {
		t.Fatalf("%s -h lists only %d flags:\n%s", bin, len(fs.takesValue), out)
	}
	return fs
}

// glob is the repository's files that match pattern, relative to the root,
// sorted.
func glob(t *testing.T, pattern string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range matches {
		rel, err := filepath.Rel(root, m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	sort.Strings(out)
	return out
}

// allDocs is every Markdown document of the project: the guides under
// docs/ and docs/labs/, and the READMEs.
func allDocs(t *testing.T) []string {
	t.Helper()
	docs := append(glob(t, "docs/*.md"), glob(t, "docs/labs/*.md")...)
	return append(docs, "README.md", "loadtest/README.md")
}

// labText is the lab sheets, docs/labs/*.md, one after the other in their
// order: one "## Lab N" section each, with a smoke test before them and a
// clean-up after.
func labText(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, f := range glob(t, "docs/labs/*.md") {
		b.WriteString(read(t, f))
		b.WriteString("\n")
	}
	return b.String()
}

// Relative links of every document lead to files that exist.
func TestLinks(t *testing.T) {
	for _, doc := range allDocs(t) {
		for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(read(t, doc), -1) {
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(doc), m[1])); err != nil {
				t.Errorf("%s links to %s: %v", doc, m[1], err)
			}
		}
	}
}

// generated checks that the part of doc between the lines begin and end is
// want; with -update it rewrites that part instead. wrong says what to do
// when it is not.
func generated(t *testing.T, doc, begin, end, want, wrong string) {
	t.Helper()
	text := read(t, doc)
	before, rest, ok := strings.Cut(text, begin)
	if !ok {
		t.Fatalf("%s has no line %q", doc, strings.TrimSpace(begin))
	}
	got, after, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("%s has no line %q", doc, strings.TrimSpace(end))
	}
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(filepath.Join(root, doc), []byte(before+begin+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the generated part of %s", doc)
		return
	}
	t.Errorf("%s: %s\n--- want ---\n%s", doc, wrong, want)
}
