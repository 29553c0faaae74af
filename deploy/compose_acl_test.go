package deploy

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/redisacl"
	"flashsale/internal/testsupport"
)

// A compose Redis node as its entrypoint and command start it, here: the
// entrypoint's own script writes the ACL file from internal/redisacl/users.acl (redisacl.File
// writes the same), redis-server runs with the command's arguments on a
// free loopback port; then the app's URL from the compose file, the health
// check and the operator's user are tried against it.
func TestComposeRedisACL(t *testing.T) {
	env := map[string]string{"FLASHSALE_ADMIN_TOKEN": "x", "FLASHSALE_REDIS_APP_PASSWORD": "compose-app.1", "FLASHSALE_REDIS_ADMIN_PASSWORD": "compose-admin~2"}
	svcs, err := loadCompose(t, env)
	if err != nil {
		t.Fatal(err)
	}
	node := svcs["redis-1"]
	entry, cmd := strs(node["entrypoint"]), strs(node["command"])
	if len(entry) != 4 || entry[0] != "sh" || !strings.HasSuffix(strings.TrimSpace(entry[2]), `exec "$@"`) {
		t.Fatalf("redis-1's entrypoint is %q, want [sh -ec script name] ending in exec \"$@\"", entry)
	}
	if len(cmd) == 0 || cmd[0] != "redis-server" {
		t.Fatalf("redis-1's command is %q, want redis-server", cmd)
	}
	prep := strings.TrimSuffix(strings.TrimSpace(entry[2]), `exec "$@"`)
	const rules = "/etc/flashsale/users.acl.in"
	var mounted bool
	for _, v := range strs(node["volumes"]) {
		mounted = mounted || v == "./internal/redisacl/users.acl:"+rules+":ro"
	}
	if !mounted {
		t.Fatalf("redis-1 does not mount internal/redisacl/users.acl at %s: %q", rules, strs(node["volumes"]))
	}

	dir := t.TempDir()
	live := filepath.Join(dir, "users.acl")
	script := strings.ReplaceAll(prep, rules, filepath.Join(root, "internal/redisacl/users.acl"))
	script = strings.ReplaceAll(script, "/tmp/users.acl", live)
	sh := exec.Command("sh", "-ec", script)
	sh.Env = testsupport.CleanEnv()
	for k, v := range node.env() {
		sh.Env = append(sh.Env, k+"="+v)
	}
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("redis-1's entrypoint: %v\n%s", err, out)
	}
	got, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	want, err := redisacl.File(env["FLASHSALE_REDIS_APP_PASSWORD"], env["FLASHSALE_REDIS_ADMIN_PASSWORD"])
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("the compose entrypoint writes\n%s\nredisacl.File writes\n%s", got, want)
	}

	port := testsupport.FreePort(t)
	args := []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir}
	for _, a := range cmd[1:] {
		args = append(args, strings.ReplaceAll(a, "/tmp/users.acl", live))
	}
	testsupport.RedisServer(t, args...)

	ctx := context.Background()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	first, _, _ := strings.Cut(svcs["app-1"].env()["FLASHSALE_REDIS"], ",")
	u, err := url.Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	if opt.Username != redisacl.AppUser {
		t.Errorf("the apps log in as %q, want %s", opt.Username, redisacl.AppUser)
	}
	app := redis.NewClient(opt)
	defer app.Close()
	if err := app.Set(ctx, "flashsale:compose-acl", "1", 0).Err(); err != nil {
		t.Errorf("the apps' URL cannot SET: %v", err)
	}
	if err := app.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Errorf("the apps' user undid noeviction (%v)", err)
	}
	anon := redis.NewClient(&redis.Options{Addr: addr})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("PING without a login answered %v, want NOAUTH", err)
	}
	admin := redis.NewClient(&redis.Options{Addr: addr, Username: redisacl.AdminUser, Password: env["FLASHSALE_REDIS_ADMIN_PASSWORD"]})
	defer admin.Close()
	if err := admin.ConfigGet(ctx, "maxmemory-policy").Err(); err != nil {
		t.Errorf("the operator's user cannot CONFIG GET: %v", err)
	}

	// The health check, pointed at this port: PONG as the app's user, and
	// not healthy with a refused login.
	hc := node.healthcheck()
	if len(hc) != 2 || hc[0] != "CMD-SHELL" {
		t.Fatalf("redis-1's health check %q, want CMD-SHELL", hc)
	}
	check := func(password string) error {
		c := exec.Command("sh", "-c", strings.ReplaceAll(hc[1], "redis-cli ", fmt.Sprintf("redis-cli -p %d ", port)))
		c.Env = append(testsupport.CleanEnv(), "REDISCLI_AUTH="+password)
		return c.Run()
	}
	if err := check(node.env()["REDISCLI_AUTH"]); err != nil {
		t.Errorf("the health check fails on a healthy node: %v", err)
	}
	var exit *exec.ExitError
	if err := check("wrong"); !errors.As(err, &exit) {
		t.Errorf("the health check passed (%v) with a refused login", err)
	}
}
