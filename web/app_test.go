package web

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flashsale/internal/testsupport"
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
func TestMain(m *testing.M) { os.Exit(testsupport.Main(m)) }

// startApp gives the app under test: the real flashsale binary, started as
// a process on a free loopback port with its own SQLite file and its own
// local Redis nodes, and stopped by its PID with the test. Its log is kept
// with the test's artifacts.
func startApp(t *testing.T) app {
	t.Helper()
	const token = "web-test-admin-token"
	logPath := filepath.Join(artifacts(t), "flashsale.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() }) // after the app has stopped: cleanups run last-in first-out
	a := testsupport.StartApp(t, testsupport.Binary(t, "."), testsupport.AppOptions{
		Args: []string{"-db", filepath.Join(t.TempDir(), "s.db"), "-admin-token", token},
		Log:  logFile,
	})
	t.Logf("flashsale (pid %d) on %s, log %s", a.PID, a.URL, logPath)
	return app{base: a.URL, token: token}
}
