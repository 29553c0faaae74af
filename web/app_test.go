package web

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"flashsale/lock"
)

// app is a running storefront the browser tests point at.
type app struct {
	base  string
	token string
}

// reset starts a clean sale through the admin API (body "" for the defaults).
func (a app) reset(t *testing.T, body string) {
	t.Helper()
	if status, answer := a.admin(t, "POST", "/api/admin/reset", body); status/100 != 2 {
		t.Fatalf("reset: %d %s", status, answer)
	}
}

// admin sends one admin request and returns its status and body.
func (a app) admin(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, a.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestMain removes the binary the browser tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// buildApp builds the flashsale binary once per test run.
func buildApp() (string, error) {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "flashsale-web-test-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "flashsale")
		cmd := exec.Command("go", "build", "-o", binary, ".")
		cmd.Dir = ".."
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = &buildError{err: err, out: out.String()}
		}
	})
	return binary, buildErr
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.out) }

// startApp gives the app under test: the real flashsale binary, started as
// a subprocess on a free loopback port with its own SQLite file and its own
// local Redis nodes, and stopped by its PID with the test.
//
// While the rest of the app is still being written, a part it lacks is stood
// in for, and the test log says which: pages it does not serve yet are served
// by this package's handler in front of it (everything else proxied to the
// real app); a workshop run API it does not have yet is the in-memory fake;
// a binary that does not build is replaced by the fake API entirely. In CI
// (CI=true) any stand-in fails the test: CI drives the real app only.
func startApp(t *testing.T) app {
	t.Helper()
	bin, err := buildApp()
	if err != nil {
		standIn(t, "the flashsale binary does not build, so the whole API is the in-memory fake: "+err.Error())
		return startFake(t)
	}
	real := startReal(t, bin)
	pages := servesPages(t, real)
	runs := hasRunAPI(t, real)
	if pages && runs {
		return real
	}
	target, err := url.Parse(real.base)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", httputil.NewSingleHostReverseProxy(target))
	if !pages {
		standIn(t, "the real app does not serve the pages at / yet; this package's handler serves them in front of it")
		h := Handler(Options{LockSource: lock.Source})
		for _, p := range []string{"GET /{$}", "GET /workshop", "GET /workshop/", "GET /static/", "GET /workshop/source/"} {
			mux.Handle(p, h)
		}
	}
	if !runs {
		standIn(t, "the real app has no workshop run API yet (GET /api/admin/workshop/runs is 404); the in-memory fake answers it")
		newFakeAPI(real.token).workshopRoutes(mux)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return app{base: srv.URL, token: real.token}
}

// standIn reports a part of the app the test could not drive for real.
func standIn(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI drives the real app only: %s", why)
	}
	t.Logf("STAND-IN (not the real app): %s", why)
}

// servesPages reports whether the app's / is this package's storefront.
func servesPages(t *testing.T, a app) bool {
	res, err := http.Get(a.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode == 200 && strings.Contains(string(body), "/static/store.js")
}

// hasRunAPI reports whether the app answers the workshop's run list.
func hasRunAPI(t *testing.T, a app) bool {
	req, _ := http.NewRequest("GET", a.base+"/api/admin/workshop/runs", nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode != http.StatusNotFound
}

func startFake(t *testing.T) app {
	const token = "t"
	mux := http.NewServeMux()
	newFakeAPI(token).routes(mux)
	mux.Handle("/", Handler(Options{LockSource: lock.Source}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return app{base: srv.URL, token: token}
}

func startReal(t *testing.T, bin string) app {
	t.Helper()
	const token = "t"
	addr := freeAddr(t)
	dir := t.TempDir()
	logPath := filepath.Join(artifacts(t), "flashsale.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-addr", addr, "-db", filepath.Join(dir, "s.db"), "-admin-token", token)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Logf("flashsale (pid %d) on %s, log %s", cmd.Process.Pid, addr, logPath)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// Graceful first, so it stops its own Redis nodes; by PID only.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Errorf("flashsale (pid %d) did not stop within 20 s of SIGTERM; killing it", cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
	})
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/readyz", nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return app{base: base, token: token}
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("flashsale exited before it was ready: %v (log %s)", err, logPath)
		case <-ctx.Done():
			t.Fatalf("flashsale not ready within 90 s (log %s)", logPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freeAddr finds a free loopback port. Another process could take it before
// the app binds it; on this machine's loopback that race is rare enough.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
