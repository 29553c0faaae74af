package docs

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/redis/go-redis/v9"

	"flashsale/internal/testsupport"
)

// The persistence lab: the compose file's Redis arguments, run here.

// redisNode is one node of the persistence lab and a client of it.
type redisNode struct {
	*testsupport.RedisProcess
	rdb *redis.Client
}

// startRedis runs redis-server with args (which name its --port) and
// connects to it.
func startRedis(t *testing.T, args []string) redisNode {
	t.Helper()
	p := testsupport.RedisServer(t, args...)
	port := args[slices.Index(args, "--port")+1]
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return redisNode{RedisProcess: p, rdb: rdb}
}

func runID(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`run_id:(\w+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatal("INFO has no run_id")
	}
	return m[1]
}

// composeRedisArgs is the command of a Redis service of docker-compose.yml,
// with ${VAR:-default} resolved from env.
func composeRedisArgs(t *testing.T, service string, env map[string]string) []string {
	t.Helper()
	var doc struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "docker-compose.yml")), &doc); err != nil {
		t.Fatal(err)
	}
	s, ok := doc.Services[service]
	if !ok || len(s.Command) == 0 || s.Command[0] != "redis-server" {
		t.Fatalf("docker-compose.yml has no redis-server service %q", service)
	}
	ref := regexp.MustCompile(`\$\{([A-Z_]+):-([^}]*)\}`)
	var out []string
	for i := 1; i < len(s.Command); i++ {
		a := s.Command[i]
		// The lab is about persistence: the node runs without the logins,
		// which deploy's TestComposeRedisACL runs with the compose file's
		// own entrypoint.
		if a == "--aclfile" {
			i++
			continue
		}
		out = append(out, ref.ReplaceAllStringFunc(a, func(m string) string {
			sm := ref.FindStringSubmatch(m)
			if v := env[sm[1]]; v != "" {
				return v
			}
			return sm[2]
		}))
	}
	return out
}

func TestPersistenceLab(t *testing.T) {
	var sec string
	for _, s := range sections(labText(t)) {
		if strings.Contains(s[1], "<!-- persistence-lab:") {
			sec = s[1]
		}
	}
	if sec == "" {
		t.Fatal("docs/labs has no persistence lab")
	}
	var service, key string
	for _, kv := range attrs(regexp.MustCompile(`<!-- persistence-lab: (.*?)-->`).FindStringSubmatch(sec)[1]) {
		switch kv[0] {
		case "service":
			service = kv[1]
		case "key":
			key = kv[1]
		}
	}
	// The commands name real services and the lab's key.
	var doc struct {
		Services map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "docker-compose.yml")), &doc); err != nil {
		t.Fatal(err)
	}
	// The embedded variant: the storefront's own flags, redis-cli on the
	// lab's key, a kill -9; the compose variant: docker compose commands.
	app, _ := binaries(t)
	af := helpOf(t, app)
	for _, f := range fences(sec) {
		for _, line := range strings.Split(strings.TrimSpace(f), "\n") {
			w := strings.Fields(line)
			switch {
			case len(w) >= 3 && w[0] == "go" && w[1] == "run" && w[2] == ".":
				for _, a := range w[3:] {
					if name, ok := strings.CutPrefix(a, "-"); ok {
						if _, known := af.takesValue[strings.SplitN(name, "=", 2)[0]]; !known {
							t.Errorf("%q: -%s is not a flag of flashsale", line, name)
						}
					}
				}
				continue
			case len(w) >= 3 && w[0] == "redis-cli":
				if !strings.Contains(line, key) {
					t.Errorf("%q does not use the lab's key %s", line, key)
				}
				continue
			case len(w) == 3 && w[0] == "kill" && w[1] == "-9":
				continue
			case regexp.MustCompile(`^until redis-cli -p PORT ping 2>/dev/null \| grep -q PONG; do sleep [0-9.]+; done$`).MatchString(line):
				continue // waits for the node, which answers LOADING or refuses while it starts
			case len(w) < 4 || w[0] != "docker" || w[1] != "compose":
				t.Errorf("neither a docker compose command nor a step of the embedded variant: %q", line)
				continue
			}
			for _, s := range w[2:] {
				if regexp.MustCompile(`^(redis|app|postgres)(-\d+)?$`).MatchString(s) {
					if _, ok := doc.Services[s]; !ok {
						t.Errorf("%q names service %s, which docker-compose.yml does not have", line, s)
					}
				}
			}
			if strings.Contains(line, "redis-cli") && !strings.Contains(line, key) {
				t.Errorf("%q does not use the lab's key %s", line, key)
			}
		}
	}
	// The log line the lab quotes is the one the app writes.
	quote := regexp.MustCompile(`"(redis node restarted[^"]*)"`).FindStringSubmatch(strings.Join(strings.Fields(sec), " "))
	if quote == nil || !strings.Contains(read(t, "lock/internal/node/restart.go"), quote[1]) {
		t.Errorf("the lab quotes the restart log line %v, which lock/internal/node/restart.go does not write", quote)
	}
	flat := strings.Join(strings.Fields(sec), " ")
	for _, c := range []struct{ quote, file string }{
		{"local Redis node exited; starting it again on its own files", "redis.go"},
		{`msg="localredis: node started" node=0 addr=`, "internal/localredis/process.go"},
	} {
		code := strings.TrimPrefix(strings.TrimSuffix(c.quote, " node=0 addr="), `msg="`)
		if !strings.Contains(flat, c.quote) || !strings.Contains(read(t, c.file), code) {
			t.Errorf("the lab should quote %q, which %s writes", c.quote, c.file)
		}
	}
	// The Redis arguments the lab quotes are the compose file's.
	composeRedisArgs(t, service, nil) // fails unless service runs redis-server
	raw := regexp.MustCompile("`(--appendonly [^`]*)`").FindStringSubmatch(sec)
	if raw == nil {
		t.Fatal("the lab does not quote the nodes' --appendonly arguments")
	}
	var doc2 struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	_ = yaml.Unmarshal([]byte(read(t, "docker-compose.yml")), &doc2)
	if !strings.Contains(strings.Join(doc2.Services[service].Command, " "), raw[1]) {
		t.Errorf("the lab quotes %q; %s runs %q", raw[1], service, doc2.Services[service].Command)
	}

	// Run it: the compose node's arguments, on a free port in a temporary
	// directory, for each fsync policy the lab names.
	for _, fsync := range []string{"everysec", "always"} {
		t.Run(fsync, func(t *testing.T) {
			dir := t.TempDir()
			args := append(composeRedisArgs(t, service, map[string]string{"APPENDFSYNC": fsync}),
				"--port", strconv.Itoa(testsupport.FreePort(t)), "--dir", dir, "--bind", "127.0.0.1")
			if !slices.Contains(args, fsync) {
				t.Fatalf("APPENDFSYNC=%s does not reach the node: %q", fsync, args)
			}
			ctx := context.Background()
			n := startRedis(t, args)
			if err := n.rdb.Set(ctx, key, "me", 60*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			before := runID(t, n.rdb)
			n.Stop(syscall.SIGKILL) // docker compose kill
			n = startRedis(t, args)
			ttl, err := n.rdb.PTTL(ctx, key).Result()
			if err != nil || ttl <= 0 || ttl >= 60*time.Second {
				t.Errorf("after a kill and a start, PTTL %v %v; the lab says it survives with its TTL running", ttl, err)
			}
			if runID(t, n.rdb) == before {
				t.Errorf("the run_id did not change across the restart: restart awareness could not see it")
			}
			// Lose the data: remove the append-only files, kill, start.
			if err := os.RemoveAll(filepath.Join(dir, "appendonlydir")); err != nil {
				t.Fatal(err)
			}
			n.Stop(syscall.SIGKILL)
			n = startRedis(t, args)
			if ttl, err := n.rdb.PTTL(ctx, key).Result(); err != nil || ttl != -2 {
				t.Errorf("after losing the AOF, PTTL %v %v; the lab says -2 (gone)", ttl, err)
			}
		})
	}
}
