package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"flashsale/curriculum"
	"flashsale/internal/testsupport"
)

// The app, started with the compose file's environment.

// app is the storefront the Dockerfile's build lines built, started by PID.
type app struct {
	*testsupport.App
	token string
}

// startApp runs the flashsale binary with env (which sets a loopback
// address) and waits for /readyz; it is stopped with the test.
func startApp(t *testing.T, env map[string]string) *app {
	t.Helper()
	a := testsupport.StartApp(t, binaries(t)["flashsale"], testsupport.AppOptions{Env: env})
	return &app{App: a, token: env["FLASHSALE_ADMIN_TOKEN"]}
}

func (a *app) do(t *testing.T, method, path string, body any, hdr map[string]string) (int, []byte, error) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(path, "/api/admin/") {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (a *app) must(t *testing.T, method, path string, body any, hdr map[string]string, want int) []byte {
	t.Helper()
	code, b, err := a.do(t, method, path, body, hdr)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %v %s, want %d\n%s", method, path, code, err, b, want, a.Output())
	}
	return b
}

// composeAppEnv is app-1's environment from the compose file, made to run
// here: a loopback port, a SQLite file instead of the postgres service, and
// no -redis, so the app starts its own Redis nodes.
func composeAppEnv(t *testing.T, overrides map[string]string) map[string]string {
	t.Helper()
	svcs, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	env := svcs["app-1"].env()
	env["FLASHSALE_ADDR"] = "127.0.0.1:0"
	env["FLASHSALE_DB"] = filepath.Join(t.TempDir(), "sale.db")
	env["FLASHSALE_REDIS"] = ""
	env["FLASHSALE_SHUTDOWN_TIMEOUT"] = "5s"
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

type product struct {
	SKU   string `json:"sku"`
	Stock int64  `json:"stock"`
}

func products(t *testing.T, a *app) []product {
	t.Helper()
	var ps []product
	if err := json.Unmarshal(a.must(t, "GET", "/api/products", nil, nil, 200), &ps); err != nil || len(ps) == 0 {
		t.Fatalf("products: %v %v", ps, err)
	}
	return ps
}

// scrape is the app's /metrics: every sample name with its label names, and
// the type of every family.
type scrape struct {
	samples  map[string]map[string]bool // sample name → label names
	families map[string]string          // family name → type
	values   map[string]map[string]bool // label name → values seen (all samples)
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func scrapeMetrics(t *testing.T, a *app) scrape {
	t.Helper()
	body := a.must(t, "GET", "/metrics", nil, nil, 200)
	s := scrape{samples: map[string]map[string]bool{}, families: map[string]string{}, values: map[string]map[string]bool{}}
	for _, line := range strings.Split(string(body), "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			w := strings.Fields(f)
			s.families[w[0]] = w[1]
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if s.samples[m[1]] == nil {
			s.samples[m[1]] = map[string]bool{}
		}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.samples[m[1]][p[1]] = true
			if s.values[p[1]] == nil {
				s.values[p[1]] = map[string]bool{}
			}
			s.values[p[1]][p[2]] = true
		}
	}
	return s
}

// family is the metric family a sample name belongs to.
func (s scrape) family(name string) string {
	for _, suf := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suf); ok && (s.families[base] == "histogram" || s.families[base] == "summary") {
			return base
		}
	}
	return name
}

// familyLabels are the label names of a family's samples, without le.
func (s scrape) familyLabels(fam string) []string {
	set := map[string]bool{}
	for name, labels := range s.samples {
		if s.family(name) != fam {
			continue
		}
		for l := range labels {
			if l != "le" && l != "quantile" {
				set[l] = true
			}
		}
	}
	return keys(set)
}

// exerciseApp makes the app export every metric it has: a sale under every
// variant, a fault that fires, a seat grab, the audit, and a lease the
// watchdog loses (its lock key removed by a reset while the holder works).
func exerciseApp(t *testing.T, a *app) {
	t.Helper()
	a.must(t, "GET", "/healthz", nil, nil, 200)
	a.must(t, "GET", "/api", nil, nil, 200)
	ps := products(t, a)
	a.must(t, "PUT", "/api/admin/faults", map[string]any{
		"seed": 1, "work_ms": 0,
		"faults": []map[string]any{{"point": "in-critical-section", "action": "pause", "p": 1, "ms": 1}},
	}, nil, 200)
	for i, v := range curriculum.Names() {
		a.must(t, "POST", "/api/orders", map[string]any{"sku": ps[0].SKU, "qty": 1, "user": fmt.Sprintf("u%d", i)},
			map[string]string{"X-Lock-Variant": v}, 201)
	}
	a.must(t, "PUT", "/api/admin/faults", map[string]any{"seed": 1, "work_ms": 1500}, nil, 200)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = a.do(t, "POST", "/api/orders", map[string]any{"sku": ps[0].SKU, "qty": 1, "user": "slow"},
			map[string]string{"X-Lock-Variant": "lua"})
	}()
	time.Sleep(300 * time.Millisecond)
	a.must(t, "POST", "/api/admin/reset", nil, nil, 200)
	<-done
	a.must(t, "PUT", "/api/admin/faults", map[string]any{"seed": 1, "work_ms": 0}, nil, 200)
	a.must(t, "GET", "/api/audit", nil, nil, 200)
}
