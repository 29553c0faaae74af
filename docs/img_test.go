package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flashsale/internal/testsupport"
)

// Every picture in docs/img is shown by a document, the README shows the
// pages', and every screenshot is of the pages as they are now: it carries
// the stamp of the page files (web/static) it was taken of, which
// TestBrowserDocImages puts there when it takes it. A page changed since
// its picture fails here, with the command that takes the pictures again.
func TestScreenshotsAreOfThePageAsItIs(t *testing.T) {
	stamp, err := testsupport.PageStamp(filepath.Join(root, "web", "static"))
	if err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	for _, doc := range allDocs(t) {
		shown.WriteString(read(t, doc))
	}
	pictures := glob(t, "docs/img/*")
	if len(pictures) == 0 {
		t.Fatal("docs/img holds no pictures")
	}
	for _, p := range pictures {
		name := filepath.Base(p)
		if !strings.Contains(shown.String(), "img/"+name) {
			t.Errorf("%s is shown by no document: show it or remove it", p)
		}
		if !strings.HasSuffix(name, ".png") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := testsupport.PNGStamp(b); got != stamp {
			t.Errorf("%s was taken of the pages at %q, they are now %q: take the pictures again with "+
				"go test ./web -run TestBrowserDocImages -args -web.docimg", p, got, stamp)
		}
	}
	readme := read(t, "README.md")
	for _, name := range []string{"storefront.png", "workshop.png", "workshop-ladder.png"} {
		if !strings.Contains(readme, "(docs/img/"+name+")") {
			t.Errorf("README.md does not show docs/img/%s", name)
		}
	}
}
