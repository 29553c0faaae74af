package curriculum_test

import (
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"flashsale/curriculum"
	"flashsale/handlers"
	"flashsale/inventory"
	"flashsale/loadtest"
	"flashsale/loadtest/workshop"
	"flashsale/web"
)

// The recipe for a new rung is its file, one entry in lock's ladder and its
// lesson here: this checks that a lesson is whole, and that everything
// which lists rungs lists it from there: the matrix, the workshop page, the
// workshop's sequence and the production allow-list.
func TestLadderIsDeclaredOnce(t *testing.T) {
	scenarios := loadtest.ScenarioNames()
	column := func(r curriculum.Lesson, what, s string) {
		if !slices.Contains(scenarios, s) {
			t.Errorf("%s: %s names %q, not a column of the matrix (%s)", r.Name, what, s, strings.Join(scenarios, ", "))
		}
	}
	page := web.Handler(web.Options{LockSource: os.DirFS("../lock"), StoreSource: inventory.Source, Logger: slog.New(slog.DiscardHandler)})
	files := curriculum.Sources(os.DirFS("../lock"), inventory.Source)
	seen := map[string]bool{}
	for _, r := range curriculum.Lessons() {
		if seen[r.Name] {
			t.Errorf("%s is in the ladder twice", r.Name)
		}
		seen[r.Name] = true
		for _, f := range []string{r.File, r.Reference} {
			if _, err := fs.Stat(files, f); err != nil {
				t.Errorf("%s: its file %s is not embedded: %v", r.Name, f, err)
			}
		}
		if r.Why == "" {
			t.Errorf("%s: no paragraph for the workshop", r.Name)
		}
		column(r, "ShowsWith", r.ShowsWith)
		for _, s := range r.Breaks {
			column(r, "Breaks", s)
			if r.Either[s] != "" || slices.Contains(r.NoClaim, s) {
				t.Errorf("%s × %s: declared to break and also either or no claim", r.Name, s)
			}
		}
		for s := range r.Either {
			column(r, "Either", s)
		}
		for _, s := range r.NoClaim {
			column(r, "NoClaim", s)
		}
		for s, why := range r.Skips {
			column(r, "Skips", s)
			if why == "" {
				t.Errorf("%s skips %s without saying why", r.Name, s)
			}
		}
		if _, ok := curriculum.Find(r.JudgedAs); r.JudgedAs != "" && !ok {
			t.Errorf("%s is judged as %q, not a rung", r.Name, r.JudgedAs)
		}

		if !slices.Contains(loadtest.Variants, r.Name) {
			t.Errorf("%s is not a row of the matrix", r.Name)
		}
		if exp, ok := loadtest.Expected(r.Name, r.ShowsWith); !ok || (exp != loadtest.Holds && exp != loadtest.Breaks) {
			t.Errorf("%s × %s, the cell that shows it, is %q (in the matrix: %v): it must hold or break", r.Name, r.ShowsWith, exp, ok)
		}
		if !slices.ContainsFunc(workshop.Sequence, func(s workshop.Step) bool { return s.Variant == r.Name }) {
			t.Errorf("%s is not in the workshop's sequence", r.Name)
		}
		if slices.Contains(handlers.CorrectVariants(), r.Name) != r.Correct {
			t.Errorf("%s: correct %v, but the production allow-list says otherwise", r.Name, r.Correct)
		}
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/workshop/source/"+r.Name, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"shows_with":"`+r.ShowsWith+`"`) {
			t.Errorf("%s: the workshop page's source view answers %d: %.200s", r.Name, rec.Code, rec.Body.String())
		}
	}
}
