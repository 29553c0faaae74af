package deploy

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"flashsale/internal/testsupport"
)

// The load runner's entrypoint: relays on loopback, then the runner against
// the app through them.

func TestLoadtestEntrypoint(t *testing.T) {
	testsupport.Need(t, "socat", "relay loopback ports to the app containers in the loadtest image")
	if testing.Short() {
		t.Skip("starts the app and a load run")
	}
	bins := binaries(t)
	env := composeAppEnv(t, nil)
	a := startApp(t, env)
	addr := strings.TrimPrefix(a.URL, "http://")
	nodes := regexp.MustCompile(`addrs=(\S+)`).FindStringSubmatch(a.Output())

	out := t.TempDir()
	cmd := exec.Command("sh", filepath.Join(root, "deploy/loadtest/entrypoint.sh"),
		"-variants", "lua", "-scenarios", "clean", "-rate", "100", "-duration", "1s", "-out", out)
	cmd.Env = append(cleanEnv(),
		"PATH="+filepath.Dir(bins["loadtest"])+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FLASHSALE_ADMIN_TOKEN="+env["FLASHSALE_ADMIN_TOKEN"],
		"LOADTEST_APPS="+addr,
		"LOADTEST_LOCK_TTL="+env["FLASHSALE_LOCK_TTL"],
		"LOADTEST_APP_PORT_BASE="+fmt.Sprint(freePortBase(t, 1)),
	)
	if nodes != nil && !strings.Contains(a.Output(), "in-process") {
		cmd.Env = append(cmd.Env, "LOADTEST_REDIS="+strings.ReplaceAll(nodes[1], ",", " "),
			"LOADTEST_REDIS_PORT_BASE="+fmt.Sprint(freePortBase(t, strings.Count(nodes[1], ",")+1)))
	}
	// Its own process group: the relays outlive the shell that exec'd the
	// runner, and are stopped with the group when the test ends. Output goes
	// to files, not pipes: the relays hold them open after the runner exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdoutF, err := os.Create(filepath.Join(out, "entrypoint.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdoutF.Close()
	stderrF, err := os.Create(filepath.Join(out, "entrypoint.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderrF.Close()
	cmd.Stdout, cmd.Stderr = stdoutF, stderrF
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGTERM) })
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	output := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, "entrypoint."+name))
		return string(b)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("entrypoint: %v\nstdout:\n%s\nstderr:\n%s", err, output("stdout"), output("stderr"))
		}
	case <-time.After(90 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waited
		t.Fatalf("the load run did not end within 90s\n%s", output("stderr"))
	}
	var rep struct {
		Notes []string `json:"notes"`
		Cells []struct {
			Variant, Scenario, Expected, Seen, Verdict string
		} `json:"cells"`
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 1 || rep.Cells[0].Verdict != "ok" || rep.Cells[0].Seen != "holds" {
		t.Errorf("lua × clean through the relays: %+v\n%s", rep.Cells, output("stdout"))
	}
	if relayedRedis := slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "LOADTEST_REDIS=") }); relayedRedis {
		for _, n := range rep.Notes {
			if strings.Contains(n, "no Redis URLs") {
				t.Errorf("the runner did not get the relayed Redis URLs: %q", n)
			}
		}
	}
	if !strings.Contains(output("stderr"), "via http://127.0.0.1:") {
		t.Errorf("the entrypoint did not say which relays it set up:\n%s", output("stderr"))
	}
}

// freePortBase finds base such that base+1 … base+n are free on loopback.
func freePortBase(t *testing.T, n int) int {
	t.Helper()
	// Below the kernel's ephemeral range (32768 and up), where outgoing
	// connections and their TIME_WAIT leftovers never sit.
	for try := 0; try < 200; try++ {
		base := 20000 + mrand.IntN(12000)
		ok := true
		for i := 1; i <= n && ok; i++ {
			if c, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i)); err != nil {
				ok = false
			} else {
				_ = c.Close()
			}
		}
		if ok && base+n < 65535 {
			return base
		}
	}
	t.Fatal("no run of free loopback ports")
	return 0
}
