package deploy

import (
	"encoding/json"
	"flashsale/internal/testsupport"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestComposeStack starts docker-compose.yml for real (with the offline
// override when deploy/offline/images.sh has built its stand-ins) and runs
// what an operator meets: the stack comes up healthy behind its balancer,
// the load runner sells exactly the stock through it, orders and the live
// stream pass through it, a replica stopped gracefully and one killed under
// load cost no acknowledged order, Redis nodes die and come back, one app is cut off from
// three nodes, a node restarts with and without its AOF, PostgreSQL stops,
// and `down -v` leaves nothing behind. Every request goes to the balancer's
// or the apps' published loopback ports or stays inside the project's own
// network.
func TestComposeStack(t *testing.T) {
	testsupport.Long(t, "docker-compose and the stack take minutes on a busy machine")
	s := newStack(t)
	s.down() // what an interrupted earlier run left
	t.Cleanup(s.down)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := s.run(time.Minute, s.composeArgs("logs", "--no-color", "--tail", "40")...)
			t.Logf("logs of the stack:\n%s", tail(out, 20000))
		}
	})

	// Each step starts from where the one before left the stack.
	for _, step := range []struct {
		name string
		run  func(*stack)
	}{
		{"up", stepUp},
		{"loadtest", stepLoadtest},
		{"balancer-sells-exactly", stepBalancerSellsExactly},
		{"balancer-stream", stepBalancerStream},
		{"balancer-graceful-stop", stepBalancerGracefulStop},
		{"balancer-kill", stepBalancerKill},
		{"redis-killed", stepRedisKilled},
		{"partition", stepPartition},
		{"aof", stepAOF},
		{"postgres-stopped", stepPostgresStopped},
		{"down", stepDown},
	} {
		ok := t.Run(step.name, func(t *testing.T) { s.t = t; step.run(s) })
		s.t = t
		if !ok {
			t.Fatalf("step %s failed; the later steps need it", step.name)
		}
	}
}

var (
	redisServices = []string{"redis-1", "redis-2", "redis-3", "redis-4", "redis-5"}
	appServices3  = []string{"app-1", "app-2", "app-3"}
)

// 1. Every image built from this tree, then up -d: every service healthy
// and running those images, every app ready.
func stepUp(s *stack) {
	s.build()
	start := time.Now()
	s.must(10*time.Minute, "up", "-d")
	s.t.Logf("up -d: %s", time.Since(start).Round(time.Second))
	s.healthy(3*time.Minute, append(append([]string{"postgres"}, redisServices...), appServices3...)...)
	s.fromTree(appServices3...)
	for n := 1; n <= 3; n++ {
		st, _, b, err := s.call(http.MethodGet, s.url(n, "/readyz"), nil)
		if err != nil || st != http.StatusOK {
			s.t.Errorf("app-%d /readyz: %d %v %s", n, st, err, b)
		}
	}
	s.balancerSees(2*time.Minute, "UP", appServices3...)
}

// productAudit is one SKU of the audit in the load runner's report.json.
type productAudit struct {
	SKU           string `json:"sku"`
	InitialStock  int64  `json:"initial_stock"`
	SoldUnits     int64  `json:"sold_units"`
	OversoldUnits int64  `json:"oversold_units"`
}

// 2. The compose loadtest service, through the balancer: the hot
// stock sells out exactly, nothing oversold, the audit clean. What is
// checked is read from the runner's report.json, written to a directory
// of the test's mounted as the runner's output.
func stepLoadtest(s *stack) {
	s.fromTree("loadtest")
	dir := s.t.TempDir()
	start := time.Now()
	out := s.must(10*time.Minute, "run", "--rm",
		"--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		"-v", dir+":/report",
		// Five seconds: long enough for the hot stock to sell out through
		// three replicas on a busy machine, where -quick's 1.5 s is not.
		"loadtest", "-quick", "-duration", "5s", "-variants", "redlock", "-scenarios", "clean", "-out", "/report")
	s.t.Logf("loadtest: %s", time.Since(start).Round(time.Second))
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		s.t.Fatalf("the load runner wrote no report.json: %v\n%s", err, tail(out, 4000))
	}
	var rep struct {
		Bugs, Errors int
		Cells        []struct {
			Variant, Scenario, Seen, Verdict string
			HotSKU                           string          `json:"hot_sku"`
			Vegeta                           json.RawMessage `json:"vegeta"`
			Audit                            struct {
				Products []productAudit `json:"products"`
			} `json:"audit"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		s.t.Fatalf("report.json: %v", err)
	}
	if len(rep.Cells) != 1 || rep.Cells[0].Variant != "redlock" || rep.Cells[0].Scenario != "clean" {
		s.t.Fatalf("report.json has cells %+v, want redlock × clean alone\n%s", rep.Cells, tail(out, 4000))
	}
	c := rep.Cells[0]
	if c.Seen != "holds" || c.Verdict != "ok" {
		s.t.Errorf("redlock × clean seen %q, verdict %q; want holds, ok\n%s", c.Seen, c.Verdict, tail(out, 4000))
	}
	i := slices.IndexFunc(c.Audit.Products, func(p productAudit) bool { return p.SKU == c.HotSKU })
	if c.HotSKU == "" || i < 0 {
		s.t.Fatalf("report.json has no audit of the hot SKU %q: %+v", c.HotSKU, c.Audit.Products)
	}
	if hot := c.Audit.Products[i]; hot.SoldUnits != hot.InitialStock || hot.OversoldUnits != 0 {
		s.t.Errorf("hot SKU %s sold %d of %d, oversold %d: want the stock sold out exactly; the answers: %s", hot.SKU, hot.SoldUnits, hot.InitialStock, hot.OversoldUnits, c.Vegeta)
	}
	if rep.Bugs != 0 || rep.Errors != 0 {
		s.t.Errorf("the load runner found %d bugs, %d errors", rep.Bugs, rep.Errors)
	}
	s.clean("after the load run")
}

// 3. Two Redis nodes killed mid-run: orders still sell (3 of 5 vote); a
// third: 503 lock_unavailable and nothing sells; all started again: sales
// resume once the restarted nodes may vote again.
func stepRedisKilled(s *stack) {
	s.reset(1_000_000)
	sh := s.shop(50_000, 1, 2, 3)
	defer sh.halt()
	soldSince := func(m, n int) func() bool {
		return func() bool { return count(sh.since(m), sold) >= n }
	}
	eventually(s.t, time.Minute, "orders sell with five nodes", soldSince(0, 5))

	s.docker("kill", s.id("redis-4"), s.id("redis-5"))
	eventually(s.t, time.Minute, "orders sell with three of five nodes", soldSince(sh.mark(), 10))

	s.docker("kill", s.id("redis-3"))
	m := sh.mark()
	eventually(s.t, time.Minute, "503 lock_unavailable with two of five nodes", func() bool {
		return count(sh.since(m), func(a answer) bool { return a.code == "lock_unavailable" }) > 0
	})
	// Every order sent after that answer finds two nodes: none may sell.
	m = sh.mark()
	eventually(s.t, time.Minute, "ten answers with two of five nodes", func() bool { return len(sh.since(m)) >= 10 })
	for _, a := range sh.since(m) {
		if a.status != http.StatusServiceUnavailable || a.code != "lock_unavailable" {
			s.t.Errorf("with two of five nodes app-%d answered %d %s, want 503 lock_unavailable", a.app, a.status, a.code)
		}
	}

	s.docker("start", s.id("redis-3"), s.id("redis-4"), s.id("redis-5"))
	started := time.Now()
	eventually(s.t, 2*time.Minute, "sales resume after the nodes are started again", soldSince(sh.mark(), 5))
	s.t.Logf("sales resumed %s after the three nodes were started", time.Since(started).Round(100*time.Millisecond))
	sh.halt()
	all := sh.since(0)
	if n := count(all, failed); n > 0 {
		s.t.Errorf("%d of %d orders failed outright (500 or no answer) while nodes died", n, len(all))
	}
	a := s.clean("after the Redis kills")
	if got := int64(count(all, sold)); a.SoldUnits != got {
		s.t.Errorf("the audit counts %d units sold, the shopper was sold %d", a.SoldUnits, got)
	}
	s.healthy(time.Minute, redisServices...)
}

// 4. app-3 cut off from redis-1..3: those nodes leave the project's network
// for one that only app-1 and app-2 share with them (same names there).
// app-3 answers 503, the others sell, the audit stays clean; then the
// nodes come back and app-3 sells again.
func stepPartition(s *stack) {
	s.reset(1_000_000)
	network := s.project + "-partition"
	s.docker("network", "create", "--label", "com.docker.compose.project="+s.project, network)
	home := s.docker("inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}", s.id("redis-1"))
	for _, app := range []string{"app-1", "app-2"} {
		s.docker("network", "connect", network, s.id(app))
	}
	for _, node := range redisServices[:3] {
		id := s.id(node)
		s.docker("network", "connect", "--alias", node, network, id)
		s.docker("network", "disconnect", home, id)
	}

	sh := s.shop(50_000, 1, 2, 3)
	defer sh.halt()
	m := sh.mark() + 1 // the order in flight while the network changed may have had its lease
	eventually(s.t, 2*time.Minute, "app-1 and app-2 sell, app-3 refuses, during the partition", func() bool {
		as := sh.since(m)
		return count(as, func(a answer) bool { return a.app != 3 && sold(a) }) >= 5 &&
			count(as, func(a answer) bool { return a.app == 3 && a.code == "lock_unavailable" }) >= 3
	})
	sh.halt()
	for _, a := range sh.since(m) {
		if a.app == 3 && a.status != http.StatusServiceUnavailable {
			s.t.Errorf("app-3, cut off from three nodes, answered %d %s; want 503", a.app, a.code)
		}
	}
	if n := count(sh.since(0), failed); n > 0 {
		s.t.Errorf("%d orders failed outright (500 or no answer) during the partition", n)
	}
	s.clean("during the partition")

	for _, node := range redisServices[:3] {
		id := s.id(node)
		s.docker("network", "connect", "--alias", node, home, id)
		s.docker("network", "disconnect", network, id)
	}
	for _, app := range []string{"app-1", "app-2"} {
		s.docker("network", "disconnect", network, s.id(app))
	}
	s.docker("network", "rm", network)
	eventually(s.t, 2*time.Minute, "app-3 sells again after the partition heals", func() bool {
		st, _ := s.order(3, "healed")
		return st == http.StatusCreated
	})
	s.clean("after the partition")
}

// 5. A held lock survives its node killed and started on the AOF volume; the
// same node started on a new, empty volume is a restarted node to the apps.
func stepAOF(s *stack) {
	const key = "flashsale:lock:sku:stack-test-held"
	cli := func(args ...string) string {
		// As the operator: the app's user may not set a key it does not
		// lock with, nor anything else outside the app's commands.
		return s.docker(append([]string{"exec", "-e", "REDISCLI_AUTH=" + s.redisAdmin, s.id("redis-1"), "redis-cli", "--no-auth-warning", "--user", "flashsale-admin"}, args...)...)
	}
	if got := cli("SET", key, "compose-test-holder", "NX", "PX", "120000"); got != "OK" {
		s.t.Fatalf("SET NX PX: %q", got)
	}
	// kill -9: Redis wrote the SET to the AOF before it answered, so the
	// file has it whatever the fsync policy (a power loss is another matter).
	s.docker("kill", s.id("redis-1"))
	s.docker("start", s.id("redis-1"))
	s.healthy(time.Minute, "redis-1")
	pttl, err := strconv.Atoi(cli("PTTL", key))
	if err != nil || pttl <= 0 {
		s.t.Errorf("after a restart on its AOF volume the held lock's PTTL is %d (%v), want > 0", pttl, err)
	}
	if got := cli("GET", key); got != "compose-test-holder" {
		s.t.Errorf("after a restart on its AOF volume the lock holds %q, want its holder", got)
	}

	volume := s.docker("inspect", "-f", `{{range .Mounts}}{{if eq .Destination "/data"}}{{.Name}}{{end}}{{end}}`, s.id("redis-1"))
	s.must(2*time.Minute, "stop", "-t", "10", "redis-1")
	s.must(time.Minute, "rm", "-f", "redis-1")
	s.docker("volume", "rm", volume)
	since := strconv.FormatInt(time.Now().Unix()-1, 10)
	s.must(2*time.Minute, "up", "-d", "--no-deps", "redis-1")
	s.healthy(time.Minute, "redis-1")
	if got := cli("PTTL", key); got != "-2" {
		s.t.Errorf("on a new volume the lock key's PTTL is %s, want -2 (gone)", got)
	}
	i := 0
	eventually(s.t, 2*time.Minute, "an app logs that redis-1 restarted", func() bool {
		i++
		s.order(1+i%3, "aof")
		for _, app := range appServices3 {
			out, _ := s.run(time.Minute, "docker", "logs", "--since", since, s.id(app))
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "restarted") && strings.Contains(line, "redis-1:6379") {
					s.t.Logf("%s: %s", app, line)
					return true
				}
			}
		}
		return false
	})
}

// 6. PostgreSQL stopped: orders answer 503 store_unavailable, never 500;
// started again: sales resume.
func stepPostgresStopped(s *stack) {
	s.reset(1_000_000)
	s.must(2*time.Minute, "stop", "-t", "10", "postgres")
	var seen []string
	eventually(s.t, 2*time.Minute, "503 store_unavailable with PostgreSQL stopped", func() bool {
		st, code := s.order(1+len(seen)%3, "pg")
		seen = append(seen, strconv.Itoa(st)+" "+code)
		if st == http.StatusInternalServerError || st == 0 {
			s.t.Fatalf("with PostgreSQL stopped an order answered %d %s (after %v)", st, code, seen)
		}
		return st == http.StatusServiceUnavailable && code == "store_unavailable"
	})
	s.t.Logf("answers while PostgreSQL stopped: %v", seen)
	s.must(2*time.Minute, "start", "postgres")
	s.healthy(2*time.Minute, "postgres")
	for n := 1; n <= 3; n++ {
		eventually(s.t, 2*time.Minute, "app-"+strconv.Itoa(n)+" sells again after PostgreSQL started", func() bool {
			st, _ := s.order(n, "pg")
			return st == http.StatusCreated
		})
	}
	s.clean("after PostgreSQL came back")
}

// 7. down -v: no container, network or volume of the project is left.
func stepDown(s *stack) {
	s.must(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "10")
	if left := s.projectLeft(); left != "" {
		s.t.Errorf("down -v left %s", left)
	}
}
