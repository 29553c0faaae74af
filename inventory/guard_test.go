package inventory

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// Every store design is named once and declared in the file it names, and
// that file is in Source: the workshop shows it as the design's code.
func TestDesignsNameTheirFiles(t *testing.T) {
	var seen []string
	for _, d := range Designs() {
		if slices.Contains(seen, d.Name) {
			t.Errorf("design %s is listed twice", d.Name)
		}
		seen = append(seen, d.Name)
		file, ok := strings.CutPrefix(d.File, "inventory/")
		if !ok {
			t.Errorf("design %s: file %s is not named from the repository's root", d.Name, d.File)
			continue
		}
		src, err := fs.ReadFile(Source, file)
		if err != nil {
			t.Errorf("design %s: %v", d.Name, err)
			continue
		}
		if !strings.Contains(string(src), `= "`+d.Name+`"`) {
			t.Errorf("design %s: %s does not declare its name", d.Name, d.File)
		}
	}
	if want := []string{DBGuard, DBForUpdate, RedisStock}; !slices.Equal(seen, want) {
		t.Errorf("designs %v, want %v", seen, want)
	}
}
