package testsupport

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// AppOptions say how StartApp runs the storefront.
type AppOptions struct {
	// Args follow the binary. Without an address in Args or Env the app
	// listens on a free loopback port (-addr 127.0.0.1:0).
	Args []string
	// Env is added to CleanEnv().
	Env map[string]string
	// Log, if set, receives a copy of the app's stdout and stderr as they
	// come (e.g. a file kept with the test's artifacts).
	Log io.Writer
}

// App is a storefront process that StartApp started.
type App struct {
	// URL is where it listens, as it printed it: http://127.0.0.1:PORT.
	URL string
	// PID is its process id.
	PID    int
	output *SyncBuffer
}

// Output is what the app has written to stdout and stderr so far.
func (a *App) Output() string { return a.output.String() }

// StartApp runs the binary at bin (see Binary) in a temporary directory of
// its own, waits until it says where it listens and /readyz answers 200, and
// stops it when the test ends: SIGTERM by PID, so it stops the Redis nodes it
// started itself, then a kill after 30 s.
func StartApp(tb testing.TB, bin string, o AppOptions) *App {
	tb.Helper()
	args := o.Args
	if !containsAddr(args) && o.Env["FLASHSALE_ADDR"] == "" {
		args = append([]string{"-addr", "127.0.0.1:0"}, args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = tb.TempDir()
	cmd.Env = CleanEnv()
	for k, v := range o.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	a := &App{output: &SyncBuffer{}}
	var out io.Writer = a.output
	if o.Log != nil {
		out = io.MultiWriter(a.output, o.Log)
	}
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	a.PID = cmd.Process.Pid
	exited := make(chan struct{})
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = io.WriteString(out, line+"\n")
			if u, ok := strings.CutPrefix(line, "listening on "); ok {
				listening <- u
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			tb.Errorf("flashsale (pid %d) did not stop within 30 s of SIGTERM; killing it", a.PID)
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case a.URL = <-listening:
	case <-exited:
		tb.Fatalf("flashsale exited at start-up:\n%s", a.output)
	case <-time.After(60 * time.Second):
		tb.Fatalf("flashsale did not listen within 60 s:\n%s", a.output)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", a.URL+"/readyz", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return a
			}
		}
		select {
		case <-exited:
			tb.Fatalf("flashsale exited before it was ready:\n%s", a.output)
		case <-ctx.Done():
			tb.Fatalf("flashsale not ready within 90 s:\n%s", a.output)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func containsAddr(args []string) bool {
	for _, a := range args {
		if a == "-addr" || a == "--addr" || strings.HasPrefix(a, "-addr=") || strings.HasPrefix(a, "--addr=") {
			return true
		}
	}
	return false
}
