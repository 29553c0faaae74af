package docs

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's layout table names every package of the module (a command
// under cmd/ is covered by its parent), so a package that moves or appears
// cannot leave the table behind.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	layout := section(read(t, "README.md"), "Layout")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| (.*?) \\|").FindAllStringSubmatch(layout, -1) {
		for _, p := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(m[1], -1) {
			named[strings.TrimSuffix(p[1], "/")] = true
		}
	}
	if len(named) == 0 {
		t.Fatal("README.md has no layout table")
	}
	packages := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "out") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			packages[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg := range packages {
		parent, _, isCmd := strings.Cut(pkg, "/cmd/")
		switch {
		case pkg == ".":
			if !named["main.go"] {
				t.Error("the layout does not name main.go")
			}
		case named[pkg], isCmd && named[parent]:
		default:
			t.Errorf("the layout in README.md does not name package %s", pkg)
		}
	}
}

// The README is a landing page: short, with the two commands (the test
// command being the one CI runs, with a timeout that a cold machine's
// compose test fits in) and a way on to every guide.
func TestReadmeLands(t *testing.T) {
	readme := read(t, "README.md")
	if n := strings.Count(readme, "\n"); n > 150 {
		t.Errorf("README.md has %d lines; a landing page keeps to 150: move detail into docs/", n)
	}
	const test = "go test -race -count=1 -p 1 -timeout 60m"
	if !strings.Contains(readme, "go run .  ") || !strings.Contains(readme, test+" ./...") {
		t.Errorf("README.md does not give the two commands, go run . and %s ./...", test)
	}
	if !strings.Contains(read(t, ".ci/run"), test) {
		t.Errorf(".ci/run no longer runs %s: the README's test command is not CI's", test)
	}
	where := section(readme, "Where next")
	for _, doc := range []string{"docs/runsheet.md", "docs/handout.md", "docs/workshop.md", "docs/matrix.md", "loadtest/README.md", "docs/performance.md",
		"docs/operations.md", "docs/design.md", "docs/api.md"} {
		if !strings.Contains(where, "]("+doc+")") {
			t.Errorf("README.md's Where next does not link %s", doc)
		}
	}
}
