package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// fake is a machine with everything, minus what a case takes away.
func fake(missing map[string]bool, goVersion string, portTaken bool, failing string) Env {
	return Env{
		GoVersion: goVersion,
		GoMod:     func() (string, error) { return "module flashsale\n\ngo 1.26.0\n", nil },
		LookPath: func(name string) (string, error) {
			if missing[name] {
				return "", exec.ErrNotFound
			}
			return "/usr/bin/" + name, nil
		},
		Output: func(_ context.Context, name string, args ...string) (string, error) {
			cmd := strings.Join(append([]string{name}, args...), " ")
			switch {
			case failing != "" && strings.HasPrefix(cmd, failing):
				return "main.go:1: undefined: x\n", errors.New("exit status 1")
			case cmd == "go env CGO_ENABLED":
				if missing["cgo"] {
					return "0\n", nil
				}
				return "1\n", nil
			case cmd == "go env CC":
				return "gcc\n", nil
			case cmd == "docker compose version":
				if missing["compose"] {
					return "", errors.New("not found")
				}
				return "Docker Compose version 2.26.1\n", nil
			case strings.HasPrefix(cmd, "docker info"):
				if missing["engine"] {
					return "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n", errors.New("exit status 1")
				}
				return "24.0.7\n", nil
			case strings.HasPrefix(cmd, "go run ./loadtest/cmd/loadtest -cells none/clean,lua/clean -quick"):
				return "2 cells: 0 bugs (a cell that must hold broke), 0 no-demo (a cell that must break held), 0 errors, 0 skipped\n", nil
			case strings.HasSuffix(cmd, "fc-list :lang=zh family"):
				if missing["cjk"] {
					return "", nil
				}
				return "WenQuanYi Micro Hei,文泉驿微米黑,文泉驛微米黑\nNoto Sans CJK SC,Noto Sans CJK SC Regular\nWenQuanYi Micro Hei,文泉驿微米黑,文泉驛微米黑\n", nil
			case strings.HasSuffix(cmd, "redis-server --version") && missing["redis7"]:
				return "Redis server v=6.0.16 sha=00000000:0 malloc=jemalloc-5.2.1 bits=64\n", nil
			}
			return "Redis server v=7.0.15\n", nil
		},
		Listen: func(string) error {
			if portTaken {
				return errors.New("bind: address already in use")
			}
			return nil
		},
	}
}

func TestPreflight(t *testing.T) {
	for _, c := range []struct {
		name      string
		env       Env
		args      []string
		exit      int
		says      []string // lines that must be in the output
		buildRuns bool
	}{
		{"ready", fake(nil, "go1.26.8", false, ""), nil, 0,
			[]string{"ok      Go               go1.26.8", "ok      redis-server     /usr/bin/redis-server: Redis server v=7.0.15",
				"ok      docker compose   docker compose, Docker engine 24.0.7", "ok      smoke run        none broke and lua held", "Ready for the workshop"}, true},
		{"Redis 6", fake(map[string]bool{"redis7": true}, "go1.26.8", false, ""), nil, 1,
			[]string{"MISSING redis-server", "is Redis 6.0, older than the 7 the labs need"}, false},
		{"compose without an engine", fake(map[string]bool{"engine": true}, "go1.26.8", false, ""), []string{"-build=false"}, 0,
			[]string{"note    docker compose   docker compose is installed, but no Docker engine answers (docker info: Cannot connect to the Docker daemon"}, false},
		{"smoke run fails", fake(nil, "go1.26.8", false, "go run ./loadtest"), nil, 1,
			[]string{"MISSING smoke run", "go run ./loadtest/cmd/loadtest failed"}, true},
		{"no smoke run", fake(nil, "go1.26.8", false, ""), []string{"-smoke=false"}, 0,
			[]string{"ok      go test", "Ready"}, true},
		{"no redis-server", fake(map[string]bool{"redis-server": true}, "go1.26.8", false, ""), nil, 1,
			[]string{"MISSING redis-server     not on PATH: ", "sudo apt-get install redis-server", "Not ready"}, false},
		{"no C compiler", fake(map[string]bool{"gcc": true}, "go1.26.8", false, ""), nil, 1,
			[]string{"MISSING C compiler", "gcc is not on PATH: the SQLite driver (mattn/go-sqlite3) is C"}, false},
		{"cgo off", fake(map[string]bool{"cgo": true}, "go1.26.8", false, ""), nil, 1,
			[]string{"cgo is off"}, false},
		{"old Go", fake(nil, "go1.22.4", false, ""), nil, 1,
			[]string{"go1.22.4 is older than the go 1.26 that go.mod needs"}, false},
		{"port in use is only noted", fake(nil, "go1.26.8", true, ""), []string{"-build=false"}, 0,
			[]string{"note    port 127.0.0.1:8080", "go run . -addr 127.0.0.1:8090", "lsof -nP -iTCP:8080 -sTCP:LISTEN", "Ready"}, false},
		{"optional tools only noted", fake(map[string]bool{"chromium": true, "redis-sentinel": true, "compose": true, "docker-compose": true, "redis-cli": true}, "go1.26.8", false, ""), []string{"-build=false"}, 0,
			[]string{"note    redis-cli", "note    chromium", "note    redis-sentinel", "note    docker compose", "Ready"}, false},
		{"no font for Chinese is only noted", fake(map[string]bool{"cjk": true}, "go1.26.8", false, ""), []string{"-build=false"}, 0,
			[]string{"note    CJK font         no font covers Chinese (fc-list :lang=zh lists none)", "sudo apt-get install fonts-wqy-microhei (or fonts-noto-cjk)", "macOS ships PingFang SC", "Ready"}, false},
		{"a font for Chinese", fake(nil, "go1.26.8", false, ""), []string{"-build=false"}, 0,
			[]string{"ok      CJK font         2 font families cover Chinese (fc-list :lang=zh), WenQuanYi Micro Hei among them"}, false},
		{"no fontconfig", fake(map[string]bool{"fc-list": true}, "go1.26.8", false, ""), []string{"-build=false"}, 0,
			[]string{"note    CJK font         fc-list (fontconfig) is not on PATH", "fonts-wqy-microhei", "Ready"}, false},
		{"fontconfig fails", fake(nil, "go1.26.8", false, "/usr/bin/fc-list"), []string{"-build=false"}, 0,
			[]string{"note    CJK font         fc-list :lang=zh failed (exit status 1: main.go:1: undefined: x)", "fonts-wqy-microhei", "Ready"}, false},
		{"build fails", fake(nil, "go1.26.8", false, "go build"), nil, 1,
			[]string{"MISSING go build", "undefined: x"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), c.args, c.env, &out, &errOut)
			if code != c.exit {
				t.Errorf("exit %d, want %d\n%s%s", code, c.exit, out.String(), errOut.String())
			}
			for _, s := range c.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the output does not say %q:\n%s", s, out.String())
				}
			}
			if built := strings.Contains(out.String(), "go mod"); built != c.buildRuns {
				t.Errorf("build steps ran: %v, want %v\n%s", built, c.buildRuns, out.String())
			}
			if smoked := strings.Contains(out.String(), "smoke run"); smoked && !c.buildRuns || c.name == "no smoke run" && smoked {
				t.Errorf("the smoke run ran without a build, or with -smoke=false\n%s", out.String())
			}
		})
	}
}
