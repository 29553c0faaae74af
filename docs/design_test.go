package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flashsale/loadtest"
)

// The design's expected-outcomes table is the one the load runner judges by,
// cell by cell. The redlock variants' node-restart cells give both halves:
// the runner's node-restart column is the one with restart awareness, its
// node-restart-unaware column the one without.
func TestDesignMatrixIsTheRunners(t *testing.T) {
	var table []string
	for _, sec := range sections(read(t, "docs/design.md")) {
		if sec[0] == "Expected outcomes" {
			matrix, _, _ := strings.Cut(sec[1], "\n### ") // the planned scenarios follow
			for line := range strings.Lines(matrix) {
				if strings.HasPrefix(line, "| `") {
					table = append(table, line)
				}
			}
		}
	}
	if len(table) != len(loadtest.Variants) {
		t.Fatalf("design.md's matrix has %d rows, the runner knows %d variants", len(table), len(loadtest.Variants))
	}
	cols := []string{loadtest.Clean, loadtest.CrashBetweenSteps, loadtest.PauseBetweenReleaseSteps,
		loadtest.PauseInCriticalSection, loadtest.NodeDown, loadtest.NodeRestart}
	for i, row := range table {
		cells := strings.Split(strings.Trim(strings.TrimSpace(row), "|"), "|")
		variant := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if variant != loadtest.Variants[i] {
			t.Errorf("row %d is %q, the runner's variant %d is %q", i+1, variant, i+1, loadtest.Variants[i])
			continue
		}
		for j, col := range cols {
			text := strings.TrimSpace(cells[j+1])
			want, _ := loadtest.Expected(variant, col)
			says := strings.HasPrefix(text, string(want))
			if col == loadtest.NodeRestart && variant == "redlock" {
				unaware, _ := loadtest.Expected(variant, loadtest.NodeRestartUnaware)
				says = strings.HasPrefix(text, string(unaware)+" without") && strings.HasSuffix(text, string(want)+" with it")
			}
			if col == loadtest.NodeRestart && variant == "redlock+fence" {
				unaware, _ := loadtest.Expected(variant, loadtest.NodeRestartUnaware)
				says = says && strings.Contains(text, string(unaware)+" without it")
			}
			if !says {
				t.Errorf("%s × %s: design.md says %q, the runner expects %s", variant, col, text, want)
			}
		}
	}
}

// The project stands alone: nothing in it cites a planning file or a source
// text kept outside the repository.
func TestNoReferenceOutsideTheRepo(t *testing.T) {
	outside := []string{"DESIGN" + ".md", "../" + "shared", "seed " + "article", "seeds" + "/"}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".js", ".html", ".css", ".yml", ".yaml", ".sh", ".conf", "":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range outside {
			if strings.Contains(string(b), s) {
				t.Errorf("%s mentions %q, which is not in the repository", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
