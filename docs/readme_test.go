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
	var layout string
	for _, sec := range sections(read(t, "README.md")) {
		if sec[0] == "Layout" {
			layout = sec[1]
		}
	}
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
