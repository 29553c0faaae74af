package docs

import (
	"os"
	"path/filepath"
	"regexp"
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

// Relative links of the guides, the design and the READMEs lead to files
// that exist.
func TestLinks(t *testing.T) {
	for _, doc := range []string{"docs/workshop.md", "docs/workshop-solutions.md", "docs/operations.md", "docs/design.md",
		"docs/matrix.md", "docs/performance.md", "docs/api.md", "README.md", "loadtest/README.md"} {
		for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(read(t, doc), -1) {
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(doc), m[1])); err != nil {
				t.Errorf("%s links to %s: %v", doc, m[1], err)
			}
		}
	}
}
