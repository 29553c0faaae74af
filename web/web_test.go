package web

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"flashsale/curriculum"
	"flashsale/inventory"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func get(t *testing.T, h http.Handler, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestPages(t *testing.T) {
	h := Handler(Options{LockSource: os.DirFS("../lock"), StoreSource: inventory.Source, Logger: quiet()})
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
		contains     string
	}{
		{"GET", "/", 200, "text/html", `<script src="/static/store.js"`},
		{"HEAD", "/", 200, "text/html", ""},
		{"GET", "/workshop", 200, "text/html", `<script src="/static/workshop.js"`},
		{"GET", "/workshop/", 301, "", ""},
		{"GET", "/static/app.css", 200, "text/css", ".seat"},
		{"GET", "/static/common.js", 200, "javascript", "readSSE"},
		{"GET", "/static/store.js", 200, "javascript", "Idempotency-Key"},
		{"GET", "/static/workshop.js", 200, "javascript", "/api/admin/workshop/runs"},
		{"GET", "/static/index.html", 404, "application/json", `"error":"not_found"`},
		{"GET", "/static/nope.js", 404, "application/json", `"error":"not_found"`},
		{"GET", "/nope", 404, "application/json", `"error":"not_found"`},
		{"POST", "/", 405, "application/json", `"error":"method_not_allowed"`},
		{"GET", "/workshop/source/get-del", 200, "application/json", `"file":"ladder/get_del.go"`},
		{"GET", "/workshop/source/lua%2Bfence", 200, "application/json", `"variant":"lua+fence"`},
		{"GET", "/workshop/source/redlock+fence", 200, "application/json", `"file":"redlock_fence.go"`},
		{"GET", "/workshop/source/nope", 404, "application/json", `"error":"unknown_variant"`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			res := get(t, h, tc.method, tc.path, nil)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			if ct := res.Header.Get("Content-Type"); !strings.Contains(ct, tc.ctype) {
				t.Errorf("Content-Type %q, want %q", ct, tc.ctype)
			}
			if !strings.Contains(string(body), tc.contains) {
				t.Errorf("body does not contain %q:\n%.300s", tc.contains, body)
			}
			if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
		})
	}
}

func TestAssetRevalidation(t *testing.T) {
	h := Handler(Options{Logger: quiet()})
	res := get(t, h, "GET", "/static/store.js", nil)
	etag := res.Header.Get("ETag")
	if etag == "" || res.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, res.Header.Get("Cache-Control"))
	}
	res = get(t, h, "GET", "/static/store.js", http.Header{"If-None-Match": {etag}})
	if res.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation answered %d, want 304", res.StatusCode)
	}
}

// The pages name no host: everything they load comes from this server.
func TestNoRemoteAssets(t *testing.T) {
	for name, a := range loadAssets() {
		for _, bad := range []string{"http://", "https://", "//cdn", "<script>", "style=\""} {
			if strings.Contains(string(a.body), bad) && !(bad == "http://" && strings.Contains(string(a.body), "http://www.w3.org/2000/svg")) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
}

func TestRoutesCoverHandler(t *testing.T) {
	want := []string{"/", "/workshop", "/static/*file", "/workshop/source/:variant"}
	if got := Routes(); !slices.Equal(got, want) {
		t.Fatalf("Routes() = %v, want %v", got, want)
	}
}

func TestSource(t *testing.T) {
	h := Handler(Options{LockSource: os.DirFS("../lock"), StoreSource: inventory.Source, Logger: quiet()})
	read := func(variant string) sourceView {
		res := get(t, h, "GET", "/workshop/source/"+variant, nil)
		if res.StatusCode != 200 {
			t.Fatalf("%s: status %d", variant, res.StatusCode)
		}
		var s sourceView
		if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, name := range curriculum.Names() {
		s := read(name)
		if s.Variant != name || s.Source == "" || s.Why == "" {
			t.Errorf("%s: %+v", name, s)
		}
		correct := s.File == s.Reference
		if correct != (len(s.Differs) == 0 && len(s.ReferenceDiffers) == 0) {
			t.Errorf("%s: file %s, reference %s, differs %v / %v", name, s.File, s.Reference, s.Differs, s.ReferenceDiffers)
		}
	}
	// The line that makes get-del wrong, and the Lua release that replaces
	// it, are both among the highlighted lines.
	s := read("get-del")
	if !marked(s.Source, s.Differs, "maybe no longer ours") {
		t.Errorf("get-del: the broken DEL is not highlighted; differs %v", s.Differs)
	}
	if !marked(s.ReferenceSource, s.ReferenceDiffers, "compareAndDelete.Run") {
		t.Errorf("lua.go: the compare-and-delete is not highlighted; differs %v", s.ReferenceDiffers)
	}
	// A line both files share is not highlighted.
	if marked(s.Source, s.Differs, "package lock") {
		t.Error("get-del: the package clause is highlighted")
	}
}

// marked reports whether a highlighted line of text contains needle.
func marked(text string, lines []int, needle string) bool {
	all := splitLines(text)
	for _, n := range lines {
		if strings.Contains(all[n-1], needle) {
			return true
		}
	}
	return false
}

func TestSourceMissing(t *testing.T) {
	src := fstest.MapFS{"lua.go": {Data: []byte("package lock\n")}}
	h := Handler(Options{LockSource: src, Logger: quiet()})
	if res := get(t, h, "GET", "/workshop/source/lua", nil); res.StatusCode != 200 {
		t.Errorf("lua: %d", res.StatusCode)
	}
	if res := get(t, h, "GET", "/workshop/source/get-del", nil); res.StatusCode != 404 {
		t.Errorf("get-del without its file: %d", res.StatusCode)
	}
	h = Handler(Options{Logger: quiet()})
	if res := get(t, h, "GET", "/workshop/source/lua", nil); res.StatusCode != 404 {
		t.Errorf("no source at all: %d", res.StatusCode)
	}
}

func TestDiffLines(t *testing.T) {
	for _, tc := range []struct {
		name         string
		a, b         string
		onlyA, onlyB []int
	}{
		{"same", "x\ny\n", "x\ny\n", []int{}, []int{}},
		{"both empty", "", "", []int{}, []int{}},
		{"a empty", "", "x\ny", []int{}, []int{1, 2}},
		{"one line changed", "a\nB\nc", "a\nb\nc", []int{2}, []int{2}},
		{"inserted", "a\nnew\nb", "a\nb", []int{2}, []int{}},
		{"deleted", "a\nb", "a\ngone\nb", []int{}, []int{2}},
		{"trailing blanks ignored", "a  \nb\t", "a\nb", []int{}, []int{}},
		{"crlf", "a\r\nb\r\n", "a\nb\n", []int{}, []int{}},
		{"moved", "a\nb\nc", "c\na\nb", []int{3}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := diffLines(splitLines(tc.a), splitLines(tc.b))
			if !slices.Equal(a, tc.onlyA) || !slices.Equal(b, tc.onlyB) {
				t.Fatalf("got %v / %v, want %v / %v", a, b, tc.onlyA, tc.onlyB)
			}
		})
	}
}

// Both pages offer every rung of the lock package's ladder, in its order,
// and list no variant of their own.
func TestPagesOfferTheLadder(t *testing.T) {
	h := Handler(Options{LockSource: os.DirFS("../lock"), StoreSource: inventory.Source, Logger: quiet()})
	for _, page := range []string{"/", "/workshop"} {
		res := get(t, h, "GET", page, nil)
		body, _ := io.ReadAll(res.Body)
		var got []string
		for _, m := range regexp.MustCompile(`<option value="([^"]+)">`).FindAllStringSubmatch(string(body), -1) {
			if slices.Contains(curriculum.Names(), m[1]) {
				got = append(got, m[1])
			}
		}
		if !slices.Equal(got, curriculum.Names()) {
			t.Errorf("%s offers %v, the ladder is %v", page, got, curriculum.Names())
		}
		if bytes.Contains(body, []byte("<!-- lock variants -->")) {
			t.Errorf("%s still carries the placeholder", page)
		}
	}
}
