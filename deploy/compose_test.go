package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"flashsale/internal/testsupport"
)

// The compose file, read as docker-compose reads it: YAML with anchors and
// merge keys, then ${VAR}, ${VAR:-default} and ${VAR:?error} interpolated.

var interpolation = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

func interpolate(s string, env map[string]string) (string, error) {
	var errs []string
	out := interpolation.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sm := interpolation.FindStringSubmatch(m)
		name, op, arg := sm[1], sm[2], sm[3]
		if name == "" {
			name = sm[4]
		}
		v, set := env[name]
		switch op {
		case ":-":
			if v == "" {
				return arg
			}
		case "-":
			if !set {
				return arg
			}
		case ":?":
			if v == "" {
				errs = append(errs, name+": "+arg)
			}
		case "?":
			if !set {
				errs = append(errs, name+": "+arg)
			}
		}
		return v
	})
	if errs != nil {
		return "", fmt.Errorf("required variable missing: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

func interpolateAll(v any, env map[string]string) (any, error) {
	switch x := v.(type) {
	case string:
		return interpolate(x, env)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			var err error
			if out[i], err = interpolateAll(x[i], env); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			var err error
			if out[k], err = interpolateAll(e, env); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

type service map[string]any

func loadCompose(t *testing.T, env map[string]string) (map[string]service, error) {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal([]byte(read(t, "docker-compose.yml")), &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	doc, err := interpolateAll(doc, env)
	if err != nil {
		return nil, err
	}
	raw, _ := doc.(map[string]any)["services"].(map[string]any)
	out := map[string]service{}
	for name, s := range raw {
		out[name], _ = s.(map[string]any)
	}
	return out, nil
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return shellWords(x)
	case []any:
		out := make([]string, len(x))
		for i := range x {
			out[i] = str(x[i])
		}
		return out
	}
	return nil
}

func (s service) env() map[string]string {
	out := map[string]string{}
	switch x := s["environment"].(type) {
	case map[string]any:
		for k, v := range x {
			out[k] = str(v)
		}
	case []any:
		for _, kv := range x {
			k, v, _ := strings.Cut(str(kv), "=")
			out[k] = v
		}
	}
	return out
}

// dependsOn is each dependency and its condition ("service_started" for the
// short form).
func (s service) dependsOn() map[string]string {
	out := map[string]string{}
	switch x := s["depends_on"].(type) {
	case []any:
		for _, d := range x {
			out[str(d)] = "service_started"
		}
	case map[string]any:
		for d, c := range x {
			m, _ := c.(map[string]any)
			out[d] = str(m["condition"])
		}
	}
	return out
}

type port struct{ hostIP, published, target string }

func (s service) ports() []port {
	var out []port
	list, _ := s["ports"].([]any)
	for _, p := range list {
		switch x := p.(type) {
		case map[string]any:
			out = append(out, port{str(x["host_ip"]), str(x["published"]), str(x["target"])})
		default:
			f := strings.Split(strings.TrimSuffix(str(x), "/tcp"), ":")
			switch len(f) {
			case 3:
				out = append(out, port{f[0], f[1], f[2]})
			case 2:
				out = append(out, port{"", f[0], f[1]})
			case 1:
				out = append(out, port{"", "", f[0]})
			}
		}
	}
	return out
}

func (s service) healthcheck() []string {
	h, _ := s["healthcheck"].(map[string]any)
	return strs(h["test"])
}

// volumes is the sources of the service's short-form volumes.
func (s service) volumes() []string {
	var out []string
	for _, v := range strs(s["volumes"]) {
		src, _, _ := strings.Cut(v, ":")
		out = append(out, src)
	}
	return out
}

func (s service) profiles() []string { return strs(s["profiles"]) }

func (s service) buildTarget() string {
	b, _ := s["build"].(map[string]any)
	return str(b["target"])
}

var composeEnv = map[string]string{"FLASHSALE_ADMIN_TOKEN": "deploy-test-token", "FLASHSALE_REDIS_APP_PASSWORD": "deploy-test-app"}

func appServices(svcs map[string]service) []string {
	var out []string
	for name := range svcs {
		if strings.HasPrefix(name, "app-") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func TestComposeServices(t *testing.T) {
	svcs, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	var redisNodes []string
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("redis-%d", i)
		redisNodes = append(redisNodes, name)
		s, ok := svcs[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		if img := str(s["image"]); img != "redis:7.2.11" && !strings.HasPrefix(img, "redis:7.2.11@sha256:") {
			t.Errorf("%s image %q, want redis:7.2.11 (the fixes for CVE-2025-49844 and CVE-2025-21605), by tag or digest", name, img)
		}
		cmd := strings.Join(strs(s["command"]), " ")
		for _, want := range []string{"--appendonly yes", "--appendfsync everysec", "--notify-keyspace-events Kgx", `--save `} {
			if !strings.Contains(cmd, want) {
				t.Errorf("%s command %q lacks %q", name, cmd, want)
			}
		}
		if strings.Contains(cmd, "replicaof") || strings.Contains(cmd, "slaveof") {
			t.Errorf("%s is a replica; Redlock needs independent masters", name)
		}
		if hc := strings.Join(s.healthcheck(), " "); !strings.Contains(hc, "redis-cli --user flashsale") || !strings.Contains(hc, "= PONG") {
			t.Errorf("%s healthcheck %q, want redis-cli ping as the app's user, PONG and nothing else", name, hc)
		}
		if !strings.Contains(cmd, "--aclfile") || !slices.Contains(s.volumes(), "./internal/redisacl/users.acl") {
			t.Errorf("%s does not start with internal/redisacl/users.acl as its ACL file: %q", name, cmd)
		}
	}
	if pg, ok := svcs["postgres"]; !ok {
		t.Error("no service postgres")
	} else if hc := strings.Join(pg.healthcheck(), " "); !strings.Contains(hc, "pg_isready") {
		t.Errorf("postgres healthcheck %q, want pg_isready", hc)
	}

	apps := appServices(svcs)
	if len(apps) != 3 {
		t.Errorf("app services %v, want three replicas", apps)
	}
	var wantRedis []string
	for _, n := range redisNodes {
		wantRedis = append(wantRedis, "redis://flashsale:"+composeEnv["FLASHSALE_REDIS_APP_PASSWORD"]+"@"+n+":6379")
	}
	for _, name := range apps {
		s := svcs[name]
		env := s.env()
		if s.buildTarget() != "app" {
			t.Errorf("%s builds target %q, want app", name, s.buildTarget())
		}
		if got := strings.Split(env["FLASHSALE_REDIS"], ","); !slices.Equal(got, wantRedis) {
			t.Errorf("%s FLASHSALE_REDIS %q, want the five nodes as the app's Redis user %q", name, got, wantRedis)
		}
		if db := env["FLASHSALE_DB"]; !strings.HasPrefix(db, "postgres://") || !strings.Contains(db, "@postgres:5432/") {
			t.Errorf("%s FLASHSALE_DB %q, want postgres://…@postgres:5432/…", name, db)
		}
		if env["FLASHSALE_ADDR"] != "0.0.0.0:8080" {
			t.Errorf("%s FLASHSALE_ADDR %q, want 0.0.0.0:8080", name, env["FLASHSALE_ADDR"])
		}
		if env["FLASHSALE_ADMIN_TOKEN"] != composeEnv["FLASHSALE_ADMIN_TOKEN"] {
			t.Errorf("%s does not take FLASHSALE_ADMIN_TOKEN from the environment", name)
		}
		deps := s.dependsOn()
		for _, d := range append([]string{"postgres"}, redisNodes...) {
			if deps[d] != "service_healthy" {
				t.Errorf("%s depends on %s with %q, want condition service_healthy", name, d, deps[d])
			}
		}
		if hc := strings.Join(s.healthcheck(), " "); !strings.Contains(hc, "/readyz") {
			t.Errorf("%s healthcheck %q does not ask /readyz", name, hc)
		}
	}
	if p := svcs["app-1"].ports(); len(p) != 1 || p[0].published != "8081" || p[0].target != "8080" || p[0].hostIP != "127.0.0.1" {
		t.Errorf("app-1 ports %+v, want 127.0.0.1:8081:8080", p)
	}
	// The shop's one address is the balancer's, on 8080.
	lb, ok := svcs["balancer"]
	if !ok {
		t.Fatal("no balancer service")
	}
	if p := lb.ports(); len(p) != 2 || p[0] != (port{"127.0.0.1", "8080", "8080"}) || p[1] != (port{"127.0.0.1", "8404", "8404"}) {
		t.Errorf("balancer ports %+v, want 127.0.0.1:8080:8080 (the shop) and 127.0.0.1:8404:8404 (stats)", p)
	}
	if img := str(lb["image"]); !strings.HasPrefix(img, "haproxy:") {
		t.Errorf("balancer image %q, want the official haproxy", img)
	}
	if deps := lb.dependsOn(); len(deps) != len(apps) {
		t.Errorf("balancer depends on %v, want every replica %v", deps, apps)
	}

	// Ports only where a person needs them: the balancer, the apps (one
	// replica's view) and Prometheus.
	for name, s := range svcs {
		if len(s.ports()) > 0 && !strings.HasPrefix(name, "app-") && name != "prometheus" && name != "balancer" {
			t.Errorf("%s publishes %+v; only the balancer, the apps and Prometheus need a port", name, s.ports())
		}
	}

	lt, ok := svcs["loadtest"]
	if !ok {
		t.Fatal("no loadtest service")
	}
	if !slices.Equal(lt.profiles(), []string{"loadtest"}) {
		t.Errorf("loadtest profiles %v, want [loadtest]", lt.profiles())
	}
	if lt.buildTarget() != "loadtest" {
		t.Errorf("loadtest builds target %q", lt.buildTarget())
	}
	env := lt.env()
	if got := env["LOADTEST_APPS"]; got != "balancer:8080" {
		t.Errorf("loadtest attacks %q by default, want the balancer (balancer:8080)", got)
	}
	if lt.dependsOn()["balancer"] == "" {
		t.Error("loadtest attacks the balancer but does not depend on it")
	}
	for _, a := range apps {
		if lt.dependsOn()[a] != "service_healthy" {
			t.Errorf("loadtest attacks %s through the balancer but does not wait for it to be healthy", a)
		}
	}
	// LOADTEST_APPS set: the replicas directly.
	direct, err := loadCompose(t, map[string]string{"FLASHSALE_ADMIN_TOKEN": "x", "LOADTEST_APPS": "app-1:8080 app-2:8080 app-3:8080"})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, a := range strings.Fields(direct["loadtest"].env()["LOADTEST_APPS"]) {
		host, _, _ := strings.Cut(a, ":")
		targets = append(targets, host)
	}
	if !slices.Equal(targets, apps) {
		t.Errorf("with LOADTEST_APPS set, loadtest attacks %v, want every app replica %v", targets, apps)
	}
	var scanned []string
	for _, a := range strings.Fields(env["LOADTEST_REDIS"]) {
		host, _, _ := strings.Cut(a, ":")
		scanned = append(scanned, host)
	}
	if !slices.Equal(scanned, redisNodes) {
		t.Errorf("loadtest scans Redis %v, want %v", scanned, redisNodes)
	}
	if env["LOADTEST_LOCK_TTL"] != svcs["app-1"].env()["FLASHSALE_LOCK_TTL"] {
		t.Errorf("loadtest LOADTEST_LOCK_TTL %q, but the apps' TTL is %q", env["LOADTEST_LOCK_TTL"], svcs["app-1"].env()["FLASHSALE_LOCK_TTL"])
	}

	// The variables a person sets reach the services.
	set, err := loadCompose(t, map[string]string{"FLASHSALE_ADMIN_TOKEN": "x", "APPENDFSYNC": "always", "FLASHSALE_LOCK_TTL": "750ms"})
	if err != nil {
		t.Fatal(err)
	}
	if cmd := strings.Join(strs(set["redis-3"]["command"]), " "); !strings.Contains(cmd, "--appendfsync always") {
		t.Errorf("APPENDFSYNC=always does not reach redis-3: %q", cmd)
	}
	if set["app-2"].env()["FLASHSALE_LOCK_TTL"] != "750ms" || set["loadtest"].env()["LOADTEST_LOCK_TTL"] != "750ms" {
		t.Errorf("FLASHSALE_LOCK_TTL does not reach app-2 and the load runner alike")
	}
	// The admin token is required, not defaulted to something guessable.
	if _, err := loadCompose(t, map[string]string{}); err == nil || !strings.Contains(err.Error(), "FLASHSALE_ADMIN_TOKEN") {
		t.Errorf("without FLASHSALE_ADMIN_TOKEN the compose file gave %v, want an error naming it", err)
	}
}

// The load runner's part of the compose file uses only flags and variables
// `loadtest` knows. The app's variables are held to deploy/app.json, and
// that to the app's own configuration, by TestComposeFollowsTheAppContract.
func TestComposeMatchesFlags(t *testing.T) {
	testsupport.Long(t, "docker-compose and the stack take minutes on a busy machine")
	lt := helpOf(t, binaries(t)["loadtest"])
	svcs, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	// The load runner's arguments: the compose command, and the flags the
	// entrypoint adds.
	args := strs(svcs["loadtest"]["command"])
	entry := read(t, "deploy/loadtest/entrypoint.sh")
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:exec loadtest|set --)\s+(.*)$`).FindAllStringSubmatch(entry, -1) {
		args = append(args, shellWords(m[1])...)
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !lt.flags[name] {
			t.Errorf("the loadtest service passes -%s, which `loadtest -h` does not know", name)
		}
	}
	for _, must := range []string{"-targets", "-redis", "-lock-ttl"} {
		if !slices.Contains(args, must) {
			t.Errorf("the loadtest service never passes %s", must)
		}
	}
	// The LOADTEST_* variables set in the compose file are those the
	// entrypoint reads.
	for k := range svcs["loadtest"].env() {
		if strings.HasPrefix(k, "LOADTEST_") && !strings.Contains(entry, "$"+k) && !strings.Contains(entry, "${"+k) {
			t.Errorf("the loadtest service sets %s, which the entrypoint never reads", k)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// docker-compose itself parses the file (every profile), with the defaults
// and with the variables a person sets.
func TestComposeConfig(t *testing.T) {
	testsupport.Long(t, "docker-compose and the stack take minutes on a busy machine")
	// Debian's docker-compose (v1.29), or the Compose v2 plugin if that is
	// what this machine has.
	tool := []string{"docker-compose"}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		if exec.Command("docker", "compose", "version").Run() == nil {
			tool = []string{"docker", "compose"}
		} else {
			testsupport.Need(t, "docker-compose", "validate docker-compose.yml")
		}
	}
	// An empty --env-file: a developer's .env must not change what is tested.
	noEnv := filepath.Join(t.TempDir(), "empty.env")
	if err := os.WriteFile(noEnv, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(extra ...string) (string, error) {
		args := append(tool[1:], "-f", filepath.Join(root, "docker-compose.yml"), "--env-file", noEnv,
			"--profile", "loadtest", "--profile", "monitoring", "config")
		cmd := exec.Command(tool[0], args...)
		cmd.Env = append(cleanEnv(), extra...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return stderr.String(), err
		}
		return string(out), nil
	}
	out, err := run("FLASHSALE_ADMIN_TOKEN=t0ken")
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	var doc struct {
		Services map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("docker-compose config output: %v", err)
	}
	ours, _ := loadCompose(t, map[string]string{"FLASHSALE_ADMIN_TOKEN": "t0ken"})
	var got, want []string
	for name := range doc.Services {
		got = append(got, name)
	}
	for name := range ours {
		want = append(want, name)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("docker-compose sees services %v, this test's reading %v", got, want)
	}
	if !strings.Contains(out, "t0ken") {
		t.Errorf("the admin token did not reach the resolved config")
	}
	if out, err := run("FLASHSALE_ADMIN_TOKEN=t", "APPENDFSYNC=always", "PUBLISH_HOST=0.0.0.0"); err != nil {
		t.Errorf("docker-compose config with APPENDFSYNC=always: %v\n%s", err, out)
	} else if !strings.Contains(out, "always") {
		t.Errorf("APPENDFSYNC=always is not in the resolved config")
	}
	if out, err := run(); err == nil || !strings.Contains(out, "FLASHSALE_ADMIN_TOKEN") {
		t.Errorf("docker-compose config without FLASHSALE_ADMIN_TOKEN: err %v, output %q; want a refusal naming it", err, out)
	}
}
