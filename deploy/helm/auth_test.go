package helm

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The chart's copy of the ACL file is the project's one (helm reads only
// files inside the chart).
func TestACLFileIsTheProjects(t *testing.T) {
	want, err := os.ReadFile("../../internal/redisacl/users.acl")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("flashsale/files/users.acl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("deploy/helm/flashsale/files/users.acl differs from internal/redisacl/users.acl: cp internal/redisacl/users.acl deploy/helm/flashsale/files/")
	}
	eachRelease(t, func(t *testing.T, r *rendered) {
		var found bool
		for _, cm := range all[*corev1.ConfigMap](r) {
			if v, ok := cm.Data["users.acl"]; ok {
				found = true
				if v != string(want) {
					t.Errorf("ConfigMap %s's users.acl is not the project's file", cm.Name)
				}
			}
		}
		if !found {
			t.Error("no ConfigMap carries users.acl")
		}
	})
}

// No ConfigMap carries a value of a rendered Secret (a password, the admin
// token): the passwords meet the rules only inside the masters' pods.
func TestNoSecretInAConfigMap(t *testing.T) {
	eachRelease(t, func(t *testing.T, r *rendered) {
		for _, s := range all[*corev1.Secret](r) {
			for k, v := range s.StringData {
				for _, cm := range all[*corev1.ConfigMap](r) {
					for _, data := range cm.Data {
						if len(v) >= 8 && strings.Contains(data, v) {
							t.Errorf("ConfigMap %s holds Secret %s's %s", cm.Name, s.Name, k)
						}
					}
				}
			}
		}
	})
}

// secretValue follows a secretKeyRef to the rendered Secret's value.
func secretValue(t *testing.T, r *rendered, ref *corev1.SecretKeySelector) string {
	t.Helper()
	s := find[*corev1.Secret](r, ref.Name)
	if s == nil {
		t.Fatalf("Secret %s is not rendered", ref.Name)
	}
	if v, ok := s.StringData[ref.Key]; ok {
		return v
	}
	if v, ok := s.Data[ref.Key]; ok {
		return string(v)
	}
	t.Fatalf("Secret %s has no key %s", ref.Name, ref.Key)
	return ""
}

// secretEnv is the container's variables that come from Secrets, with the
// rendered Secrets' values.
func secretEnv(t *testing.T, r *rendered, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			env[e.Name] = secretValue(t, r, e.ValueFrom.SecretKeyRef)
		}
	}
	return env
}

// A master as the chart runs it, here: the init container's script makes
// the ACL file from the ConfigMap and the Secret, redis-server runs with
// the StatefulSet's arguments (its directories moved into a temporary one,
// bound to loopback), and the readiness probe's own command asks it.
type master struct {
	port    int
	app     string // the app user's password
	admin   string // the admin user's password
	appURLs []string
	probe   []string
	cli     string
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// renderMaster renders the defaults with the master on port and the lock
// TTL given, and returns the pieces the test runs.
func renderMaster(t *testing.T, port int, ttl string) (*rendered, *appsv1.StatefulSet) {
	t.Helper()
	rel := releases["defaults"]
	args := append([]string{"template", rel.name, "./flashsale", "--namespace", rel.namespace}, rel.args...)
	args = append(args, "--set", fmt.Sprintf("redis.port=%d", port), "--set", "app.lockTTL="+ttl)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{"defaults", rel, objs}
	return r, redisSet(t, r)
}

// redisCLI runs redis-cli against the master and returns its output.
func (m *master) redisCLI(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(m.cli, append([]string{"-p", fmt.Sprint(m.port)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

// startMaster runs the rendered master and its init container locally.
func startMaster(t *testing.T) *master {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed")
	}
	m := &master{port: freePort(t), cli: cli}
	r, s := renderMaster(t, m.port, "1ms")
	spec := s.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		t.Fatalf("the master's pod has %d init containers and %d containers, want 1 and 1", len(spec.InitContainers), len(spec.Containers))
	}
	init, redis := spec.InitContainers[0], spec.Containers[0]

	// The ConfigMap's rules where the init container reads them.
	dir := t.TempDir()
	rules, live, data := filepath.Join(dir, "rules"), filepath.Join(dir, "live"), filepath.Join(dir, "data")
	for _, d := range []string{rules, live, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	paths := map[string]string{}
	for _, vm := range init.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				cm := find[*corev1.ConfigMap](r, v.ConfigMap.Name)
				if cm == nil {
					t.Fatalf("ConfigMap %s is not rendered", v.ConfigMap.Name)
				}
				for k, body := range cm.Data {
					if err := os.WriteFile(filepath.Join(rules, k), []byte(body), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				paths[vm.MountPath] = rules
			case v.EmptyDir != nil:
				paths[vm.MountPath] = live
			}
		}
	}
	if len(paths) != 2 {
		t.Fatalf("the init container mounts %v, want the rules' ConfigMap and a scratch volume", paths)
	}
	relocate := func(s string) string {
		for from, to := range paths {
			s = strings.ReplaceAll(s, from+"/", to+"/")
		}
		return strings.ReplaceAll(s, "/data", data)
	}

	env := secretEnv(t, r, init)
	m.app, m.admin = env["FLASHSALE_REDIS_APP_PASSWORD"], env["FLASHSALE_REDIS_ADMIN_PASSWORD"]
	if m.app == "" || m.admin == "" || m.app == m.admin {
		t.Fatalf("the init container's passwords from the Secret: app %q, admin %q; want two, different", m.app, m.admin)
	}
	var args []string
	for _, a := range init.Command[1:] {
		args = append(args, relocate(a))
	}
	cmd := exec.Command(init.Command[0], args...)
	cmd.Env = append(os.Environ(), "FLASHSALE_REDIS_APP_PASSWORD="+m.app, "FLASHSALE_REDIS_ADMIN_PASSWORD="+m.admin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the init container's script: %v\n%s", err, out)
	}
	file, err := os.ReadFile(filepath.Join(live, "users.acl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(file)), "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" || strings.Contains(line, "${") {
			t.Errorf("the rendered ACL file keeps %q", line)
		}
	}

	// The master itself, with the StatefulSet's arguments.
	if redis.Args[0] != "redis-server" {
		t.Fatalf("the master runs %q, want redis-server", redis.Args)
	}
	var sargs []string
	for _, a := range redis.Args[1:] {
		sargs = append(sargs, relocate(a))
	}
	srv := exec.Command(server, append(sargs, "--bind", "127.0.0.1", "--daemonize", "no")...)
	var log bytes.Buffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	})
	admin := []string{"REDISCLI_AUTH=" + m.admin}
	eventually(t, 20*time.Second, "the master answers its admin", func() bool {
		return m.redisCLI(t, admin, "--user", "flashsale-admin", "ping") == "PONG"
	}, &log)

	_, app := app(t, r)
	m.appURLs = strings.Split(envOf(t, app)["FLASHSALE_REDIS"], ",")
	appSecrets := secretEnv(t, r, app)
	for i, u := range m.appURLs {
		m.appURLs[i] = strings.ReplaceAll(u, "$(REDIS_PASSWORD)", appSecrets["REDIS_PASSWORD"])
	}
	m.probe = redis.ReadinessProbe.Exec.Command
	return m
}

// eventually polls cond until it holds or the time is up (then it fails,
// with the server's log).
func eventually(t *testing.T, within time.Duration, what string, cond func() bool, log *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v\n%s", what, within, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A master takes the users of the ACL file only: no password, the default
// user or a wrong password gets nothing; the app's user (the one its
// FLASHSALE_REDIS carries) locks but cannot undo noeviction or flush; the
// admin user can.
func TestRedisOnlyWithAPassword(t *testing.T) {
	m := startMaster(t)
	for _, c := range []struct {
		what string
		env  []string
		args []string
		want string // a prefix of the reply
	}{
		{"no password", nil, []string{"ping"}, "NOAUTH"},
		{"the default user", []string{"REDISCLI_AUTH=x"}, []string{"--user", "default", "ping"}, "AUTH failed"},
		{"a wrong password", []string{"REDISCLI_AUTH=" + m.app + "x"}, []string{"--user", "flashsale", "ping"}, "AUTH failed"},
		{"the admin's password as the app", []string{"REDISCLI_AUTH=" + m.admin}, []string{"--user", "flashsale", "ping"}, "AUTH failed"},
		{"the app", []string{"REDISCLI_AUTH=" + m.app}, []string{"--user", "flashsale", "set", "flashsale:k", "v", "px", "60000", "nx"}, "OK"},
		{"the app undoing noeviction", []string{"REDISCLI_AUTH=" + m.app}, []string{"--user", "flashsale", "config", "set", "maxmemory-policy", "allkeys-lru"}, "NOPERM"},
		{"the app flushing", []string{"REDISCLI_AUTH=" + m.app}, []string{"--user", "flashsale", "flushall"}, "NOPERM"},
		{"the admin", []string{"REDISCLI_AUTH=" + m.admin}, []string{"--user", "flashsale-admin", "config", "get", "maxmemory-policy"}, "maxmemory-policy\nnoeviction"},
	} {
		got := m.redisCLI(t, c.env, append([]string{"--no-auth-warning"}, c.args...)...)
		// redis-cli prints "AUTH failed: ..." and then the command's own
		// NOAUTH: the first line is what answers the login.
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: redis-cli %v answered %q, want %q…", c.what, c.args, got, c.want)
		}
	}
	for i, u := range m.appURLs {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		if pu.User.Username() != "flashsale" {
			t.Errorf("FLASHSALE_REDIS node %d logs in as %q, want the app's user flashsale", i, pu.User.Username())
		}
		pu.Host = fmt.Sprintf("127.0.0.1:%d", m.port)
		if got := m.redisCLI(t, nil, "--no-auth-warning", "-u", pu.String(), "ping"); got != "PONG" {
			t.Errorf("FLASHSALE_REDIS node %d, with the Secret's password, answered %q", i, got)
		}
	}
}

// The readiness probe passes on PONG from a master up for a lock TTL, and
// never on an error reply (here the refused login; LOADING alike).
func TestRedisReadinessWantsPONG(t *testing.T) {
	m := startMaster(t)
	run := func(env ...string) error {
		cmd := exec.Command(m.probe[0], m.probe[1:]...)
		cmd.Env = append(os.Environ(), env...)
		return cmd.Run()
	}
	var log bytes.Buffer
	eventually(t, 30*time.Second, "the readiness probe passes", func() bool {
		return run("REDISCLI_AUTH="+m.app) == nil
	}, &log)
	if err := run("REDISCLI_AUTH=" + m.app + "x"); err == nil {
		t.Error("the probe passed with a refused login (redis-cli exits 0 on an error reply)")
	}
	if err := run(); err == nil {
		t.Error("the probe passed without a password")
	}
	_, long := renderMaster(t, m.port, "1h")
	probe := long.Spec.Template.Spec.Containers[0].ReadinessProbe.Exec.Command
	cmd := exec.Command(probe[0], probe[1:]...)
	cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+m.app)
	if cmd.Run() == nil {
		t.Error("with a 1h lock TTL the probe passed on a master up for less: the disruption budget would count a master the app does not")
	}
}
