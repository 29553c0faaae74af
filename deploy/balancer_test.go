package deploy

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashsale/internal/testsupport"
)

// haproxyConfig is deploy/haproxy/haproxy.cfg read as sections: each
// section's heading ("backend apps") and its lines split into words.
func haproxyConfig(t *testing.T) map[string][][]string {
	t.Helper()
	out := map[string][][]string{}
	section := ""
	for _, line := range strings.Split(read(t, "deploy/haproxy/haproxy.cfg"), "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			section = strings.Join(words, " ")
			out[section] = nil
			continue
		}
		out[section] = append(out[section], words)
	}
	return out
}

// option is the words after the first line of section that starts with
// key (several words: "timeout check"), or nil.
func option(lines [][]string, key string) []string {
	k := strings.Fields(key)
	for _, l := range lines {
		if len(l) >= len(k) && slices.Equal(l[:len(k)], k) {
			return l[len(k):]
		}
	}
	return nil
}

// after is the word after word in words ("inter" → "1s"), or "".
func after(words []string, word string) string {
	if i := slices.Index(words, word); i >= 0 && i+1 < len(words) {
		return words[i+1]
	}
	return ""
}

func duration(t *testing.T, what, s string) time.Duration {
	t.Helper()
	if _, err := strconv.Atoi(s); err == nil {
		s += "ms" // HAProxy's unit when none is given
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
	return d
}

// The balancer's configuration: every replica behind it, checked on
// /readyz, and the apps' drain at least as long as the balancer takes to
// mark a draining replica down, so it is out of rotation before it stops
// accepting; the stream kept open longer than the apps' heartbeat.
func TestBalancerConfig(t *testing.T) {
	cfg := haproxyConfig(t)
	svcs, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	apps := appServices(svcs)

	backend := cfg["backend apps"]
	if got := strings.Join(option(backend, "option httpchk"), " "); got != "GET /readyz" {
		t.Errorf("backend apps checks %q, want GET /readyz", got)
	}
	if got := strings.Join(option(backend, "http-check expect"), " "); got != "status 200" {
		t.Errorf("backend apps expects %q of a check, want status 200", got)
	}
	for _, b := range []string{"apps", "streams", "workshop"} {
		var servers []string
		for _, l := range cfg["backend "+b] {
			if l[0] != "server" || len(l) < 3 {
				continue
			}
			servers = append(servers, l[1])
			if want := l[1] + ":8080"; l[2] != want {
				t.Errorf("backend %s: server %s at %s, want %s", b, l[1], l[2], want)
			}
			if b != "apps" && after(l, "track") != "apps/"+l[1] {
				t.Errorf("backend %s: server %s does not track apps/%s: it would be routed to while down", b, l[1], l[1])
			}
		}
		if !slices.Equal(servers, apps) {
			t.Errorf("backend %s has servers %v, want the replicas %v", b, servers, apps)
		}
	}

	server := option(backend, "default-server")
	inter := duration(t, "inter", after(server, "inter"))
	fall, err := strconv.Atoi(after(server, "fall"))
	if err != nil || !slices.Contains(server, "check") {
		t.Fatalf("backend apps default-server %v: want check, inter and fall", server)
	}
	checkTimeout := duration(t, "timeout check", strings.Join(option(backend, "timeout check"), ""))
	// The last good check may have just ended; then fall checks fail, each
	// inter apart and taking at most the check timeout.
	markedDown := inter + time.Duration(fall)*(inter+checkTimeout)
	env := svcs["app-1"].env()
	drain := duration(t, "FLASHSALE_DRAIN", env["FLASHSALE_DRAIN"])
	if drain < markedDown {
		t.Errorf("the apps drain %v, but the balancer may take %v (inter %v, fall %d, timeout check %v) to mark one down", drain, markedDown, inter, fall, checkTimeout)
	}
	shutdown := duration(t, "FLASHSALE_SHUTDOWN_TIMEOUT", env["FLASHSALE_SHUTDOWN_TIMEOUT"])
	if grace := duration(t, "stop_grace_period", str(svcs["app-1"]["stop_grace_period"])); grace <= drain+shutdown {
		t.Errorf("stop_grace_period %v, want more than drain %v + shutdown timeout %v", grace, drain, shutdown)
	}

	// The streams idle between heartbeats (15 s): both timeouts outlast them.
	const heartbeat = 15 * time.Second
	if d := duration(t, "timeout client", strings.Join(option(cfg["defaults"], "timeout client"), "")); d <= heartbeat {
		t.Errorf("timeout client %v would cut a stream between heartbeats (%v)", d, heartbeat)
	}
	for _, b := range []string{"streams", "workshop"} {
		if d := duration(t, "timeout server", strings.Join(option(cfg["backend "+b], "timeout server"), "")); d <= heartbeat {
			t.Errorf("backend %s: timeout server %v would cut a stream between heartbeats (%v)", b, d, heartbeat)
		}
	}
	// Nothing that would hold a stream back: compression buffers it.
	for section, lines := range cfg {
		if option(lines, "compression") != nil || option(lines, "filter compression") != nil {
			t.Errorf("%s compresses: the live stream would arrive in lumps", section)
		}
	}
	if !strings.Contains(read(t, "handlers/stream.go"), "15 * time.Second") && !strings.Contains(read(t, "handlers/server.go"), "cfg.Heartbeat = 15 * time.Second") {
		t.Error("the apps' stream heartbeat is no longer 15 s; update this test and the balancer's timeouts")
	}
}

// haproxy -c checks the file the way the balancer will read it. Outside
// Docker the replicas' names do not resolve; init-addr none lets it start
// anyway, and those warnings are the only ones allowed.
func TestBalancerConfigValid(t *testing.T) {
	tool := testsupport.Need(t, "haproxy", "check deploy/haproxy/haproxy.cfg (Debian package haproxy)")
	out, err := exec.Command(tool, "-c", "-f", filepath.Join(root, "deploy/haproxy/haproxy.cfg")).CombinedOutput()
	if err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "[WARNING]") && !strings.Contains(line, "could not resolve address") {
			t.Errorf("haproxy -c warns: %s", line)
		}
		if strings.Contains(line, "[ALERT]") {
			t.Errorf("haproxy -c: %s", line)
		}
	}
}
