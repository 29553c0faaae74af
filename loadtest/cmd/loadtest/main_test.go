package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Mistakes on the command line end the run before anything is started,
// with exit status 2 and a message that names the mistake.
func TestRunRefusesBadInput(t *testing.T) {
	env := func(string) string { return "" }
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-nope"}, "flag provided but not defined"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-variants", "mutex"}, `unknown name "mutex"`},
		{[]string{"-scenarios", "meteor"}, `unknown name "meteor"`},
		{[]string{"-cells", "lua/node-restart-unaware"}, "not in the matrix"},
		{[]string{"-judge-as", "mutex"}, `judge as "mutex": not a variant`},
		{[]string{"-targets", "http://example.com:8080", "-admin-token", "t"}, "not on loopback"},
		{[]string{"-targets", "http://127.0.0.1:1"}, "admin token"},
		{[]string{"-multi-share", "1.5"}, "not a share between 0 and 1"},
		{[]string{"-scale", "-scale-skus", "1,many"}, `-scale-skus: "many" is not a count`},
		{[]string{"-scale", "-scale-nodes", "0"}, `-scale-nodes: "0" is not a count`},
		{[]string{"-scale-redraw", "scale.json"}, "needs -scale-img"},
		{[]string{"-sweep", "-slo", "p99=soon"}, "want a positive duration such as 500ms"},
		{[]string{"-sweep", "-slo", "p95=1s"}, `unknown target "p95"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(tc.args, "-out", t.TempDir()), env, &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if !strings.Contains(stderr.String(), "-strict") {
		t.Errorf("usage does not list -strict:\n%s", stderr.String())
	}
}

// -app-args reaches every instance's command line: an argument the
// storefront refuses stops the run with the storefront's own message.
func TestAppArgsReachTheInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the storefront")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-sweep", "-variants", "none", "-sweep-rates", "10", "-instances", "1", "-nodes", "1",
		"-app-args", "-max-in-flight 0", "-out", t.TempDir()}
	code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
	if code == 0 {
		t.Fatalf("the run passed with an instance argument the storefront refuses:\n%s", stdout.String())
	}
	if want := "-max-in-flight must be at least 1"; !strings.Contains(stdout.String()+stderr.String(), want) {
		t.Errorf("output does not say %q:\nstdout:\n%s\nstderr:\n%s", want, stdout.String(), stderr.String())
	}
}

// The scale run records its command as a shell reads it back: a URL with
// a "?" or "&" is quoted, a plain flag is not.
func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"-scale":                     "-scale",
		"out/scale":                  "out/scale",
		"postgres://p@h:1/t?a=b&c=d": "'postgres://p@h:1/t?a=b&c=d'",
		"it's":                       `'it'\''s'`,
		"":                           "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
