// Package web serves flashsale's browser pages: the storefront at / and the
// workshop at /workshop, with their stylesheet and scripts under /static/,
// all embedded in the binary so the pages work offline (no CDN, no build
// step: the scripts are plain JavaScript written for this page).
//
// The pages talk to the JSON API of docs/design.md only; this package serves
// nothing but the pages and one read-only helper for the workshop, the source
// of a lock variant with the lines that differ from the correct variant
// and the workshop's paragraph on it, in English or, with ?lang=zh, in
// Chinese (GET /workshop/source/{variant}). Mount the handler on every pattern that
// Routes lists.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"flashsale/curriculum"
	"fmt"
	"html"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Options configure the pages.
type Options struct {
	// LockSource holds package lock's files at its root (lua.go,
	// redlock.go, …) and its ladder's under ladder/ (ladder/get_del.go, …): the
	// program embeds them, as the web package cannot (embed cannot reach
	// outside its own directory). When nil, or when a file is missing,
	// GET /workshop/source/{variant} answers 404 for the variants affected
	// and the rest of the pages work as usual.
	LockSource fs.FS
	// StoreSource holds the inventory files of the rungs that take no lock
	// (db_guard.go, for_update.go, redis_stock.go): pass inventory.Source.
	// Their rungs name them "inventory/<file>". When nil, those variants'
	// sources answer 404.
	StoreSource fs.FS
	// Logger receives the one warning about missing variant files; nil
	// means slog.Default().
	Logger *slog.Logger
}

// Routes lists the path patterns, in gin's syntax, that the handler answers:
// mount the same handler on each, for GET and HEAD. The handler looks at the
// request path itself, so the parameter names do not matter.
//
//	h := gin.WrapH(web.Handler(web.Options{LockSource: os.DirFS("lock")}))
//	for _, p := range web.Routes() { r.GET(p, h); r.HEAD(p, h) }
func Routes() []string {
	return []string{"/", "/workshop", "/static/*file", "/workshop/source/:variant"}
}

// asset is one embedded file, with what a response for it needs.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the storefront (index.html at /), the workshop page
// (workshop.html at /workshop), the static assets under /static/ and the
// variant sources under /workshop/source/{variant}. Anything else is a 404
// with the API's error shape.
func Handler(opts Options) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	assets := loadAssets()
	sources := loadSources(opts.LockSource, opts.StoreSource, log)

	mux := http.NewServeMux()
	page := func(name string) http.HandlerFunc {
		a := assets[name]
		return func(w http.ResponseWriter, r *http.Request) { serveAsset(w, r, a) }
	}
	mux.HandleFunc("GET /{$}", page("index.html"))
	mux.HandleFunc("GET /workshop", page("workshop.html"))
	mux.HandleFunc("GET /workshop/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/workshop", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /static/{file...}", func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.PathValue("file")]
		if !ok || strings.HasSuffix(r.PathValue("file"), ".html") {
			notFound(w)
			return
		}
		serveAsset(w, r, a)
	})
	mux.HandleFunc("GET /workshop/source/{variant}", func(w http.ResponseWriter, r *http.Request) {
		s, ok := sources[r.PathValue("variant")]
		if !ok {
			writeError(w, http.StatusNotFound, "unknown_variant",
				"No lock variant of that name has its source here; pick one of "+strings.Join(curriculum.Names(), ", ")+".")
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		writeJSON(w, http.StatusOK, s.in(r.URL.Query().Get("lang")))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "This route does not accept that method.")
			return
		}
		notFound(w)
	})
	return secure(mux)
}

// loadAssets reads every embedded file once. A broken embed is a build
// mistake, so it panics at start-up rather than serving half a page.
func loadAssets() map[string]asset {
	out := map[string]asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		if path.Ext(p) == ".html" {
			body = withStrings(withVariants(body))
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[strings.TrimPrefix(p, "static/")] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("web: reading the embedded pages: " + err.Error())
	}
	return out
}

// withVariants fills a page's lock variant pickers from the ladder the lock
// package declares, in its order, so no page lists the variants itself.
func withVariants(page []byte) []byte {
	var b strings.Builder
	for i, name := range curriculum.Names() {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, `<option value="%s">%s</option>`, html.EscapeString(name), html.EscapeString(name))
	}
	return bytes.ReplaceAll(page, []byte("<!-- lock variants -->"), []byte(b.String()))
}

// withStrings puts the pages' Chinese (static/zh.json) into a page as a
// data block the scripts read before they write anything: no second request,
// no inline script for the policy to refuse. The JSON is written again with
// <, > and & escaped, so nothing in it can end the block.
func withStrings(page []byte) []byte {
	raw, err := static.ReadFile("static/zh.json")
	if err != nil {
		panic("web: reading the pages' Chinese: " + err.Error())
	}
	var strs zhStrings
	if err := json.Unmarshal(raw, &strs); err != nil {
		panic("web: the pages' Chinese is not valid JSON: " + err.Error())
	}
	block, _ := json.Marshal(strs) // maps of strings always marshal
	return bytes.ReplaceAll(page, []byte("<!-- zh strings -->"),
		[]byte(`<script type="application/json" id="zh-strings">`+string(block)+`</script>`))
}

// zhStrings is static/zh.json: the Chinese of every string the pages show,
// keyed by its English, and of every error code the API answers with.
type zhStrings struct {
	Strings map[string]string `json:"strings"`
	Errors  map[string]string `json:"errors"`
}

// serveAsset answers with an embedded file. The ETag is the content's hash,
// so a browser revalidates cheaply and never keeps a stale script after an
// upgrade (no-cache means "ask first", not "do not store").
func serveAsset(w http.ResponseWriter, r *http.Request, a asset) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// secure adds the headers every page answer carries. The pages load nothing
// from anywhere else and run no inline script or style, so the policy can
// be strict.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// errorBody is the API's error shape, so a script reading any answer from
// this server finds the same two fields.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func notFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "not_found", "No such page; the storefront is at / and the workshop at /workshop.")
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorBody{Error: code, Message: message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away: nothing left to tell it
}
