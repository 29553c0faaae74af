package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"flashsale/internal/testsupport"
)

// The compose stack, started for real: helpers of TestComposeStack.

// offlineImages are the stand-ins deploy/offline/images.sh builds; when
// they are all present the stack is started with the offline override.
var offlineImages = []string{
	"flashsale-offline/debian:bookworm",
	"flashsale-offline/redis:bookworm",
	"flashsale-offline/postgres:bookworm",
	"flashsale-offline/haproxy:bookworm",
	"flashsale-offline/golang:bookworm",
}

// stack is one compose project of docker-compose.yml under a name of its
// own, its apps published on free loopback ports.
type stack struct {
	t       *testing.T
	compose []string // docker compose, or docker-compose
	files   []string // -f arguments
	project string
	env     []string
	ports   [3]int // app-1..3
	lbPort  int    // the balancer: the shop's one address
	lbStats int    // the balancer's stats page and metrics
	token   string
	// redisAdmin is the password of flashsale-admin, the operator's Redis
	// user, which the steps' own Redis commands log in as.
	redisAdmin string
	digest     string // of the sources under test: the label its images must carry
	http       *http.Client
}

// newStack finds an engine and a compose (in CI a missing one fails the
// test, elsewhere it skips) and prepares a project; nothing is started.
func newStack(t *testing.T) *stack {
	t.Helper()
	testsupport.Need(t, "docker", "start the compose stack")
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		testsupport.Missing(t, "no Docker engine answers (needed to start the compose stack): %v: %s", err, bytes.TrimSpace(out))
	}
	s := &stack{t: t, project: "flashsale-stacktest", http: &http.Client{Timeout: 10 * time.Second}}
	if exec.Command("docker", "compose", "version").Run() == nil {
		s.compose = []string{"docker", "compose"}
	} else {
		s.compose = []string{testsupport.Need(t, "docker-compose", "start the compose stack")}
	}
	s.files = []string{"-f", filepath.Join(root, "docker-compose.yml")}
	offline := true
	for _, img := range offlineImages {
		if exec.Command("docker", "image", "inspect", img).Run() != nil {
			offline = false
		}
	}
	if offline {
		s.files = append(s.files, "-f", filepath.Join(root, "deploy/offline/compose.yml"))
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s.token = hex.EncodeToString(b)
	s.digest = sourceDigest(t)
	s.env = append(cleanEnv(), "FLASHSALE_ADMIN_TOKEN="+s.token, "PUBLISH_HOST=127.0.0.1", "SOURCE_DIGEST="+s.digest)
	// Redis passwords of the test's own, not the compose file's defaults.
	s.redisAdmin = hex.EncodeToString(b[:8]) + "-admin"
	s.env = append(s.env, "FLASHSALE_REDIS_APP_PASSWORD="+hex.EncodeToString(b[8:])+"-app", "FLASHSALE_REDIS_ADMIN_PASSWORD="+s.redisAdmin)
	s.lbPort, s.lbStats = testsupport.FreePort(t), testsupport.FreePort(t)
	s.env = append(s.env, fmt.Sprintf("PUBLISH_PORT=%d", s.lbPort), fmt.Sprintf("PUBLISH_STATS_PORT=%d", s.lbStats))
	for i := range s.ports {
		s.ports[i] = testsupport.FreePort(t)
		s.env = append(s.env, fmt.Sprintf("PUBLISH_PORT_%d=%d", i+1, s.ports[i]))
	}
	version, _ := s.run(30*time.Second, s.composeArgs("version")...)
	t.Logf("compose: %s (%s), offline images: %v", strings.Join(s.compose, " "), firstLine(version), offline)
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// composeArgs is the command line of a compose subcommand of the project.
func (s *stack) composeArgs(args ...string) []string {
	out := append([]string{}, s.compose...)
	out = append(out, s.files...)
	out = append(out, "-p", s.project)
	return append(out, args...)
}

// run runs a command with the stack's environment, bounded by limit, and
// returns its combined output.
func (s *stack) run(limit time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = s.env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return string(out), nil
}

// must runs a compose subcommand and fails the test if it fails.
func (s *stack) must(limit time.Duration, args ...string) string {
	s.t.Helper()
	out, err := s.run(limit, s.composeArgs(args...)...)
	if err != nil {
		s.t.Fatalf("%v\n%s", err, tail(out, 3000))
	}
	return out
}

// docker runs a docker subcommand and fails the test if it fails.
func (s *stack) docker(args ...string) string {
	s.t.Helper()
	out, err := s.run(2*time.Minute, append([]string{"docker"}, args...)...)
	if err != nil {
		s.t.Fatalf("%v\n%s", err, tail(out, 3000))
	}
	return strings.TrimSpace(out)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// id is the container of a service.
func (s *stack) id(service string) string {
	s.t.Helper()
	id := strings.TrimSpace(s.must(time.Minute, "ps", "-q", service))
	if id == "" {
		s.t.Fatalf("service %s has no container", service)
	}
	return id
}

// eventually polls cond every 200ms until it holds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", limit, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// healthy waits until every container of the services reports healthy.
func (s *stack) healthy(limit time.Duration, services ...string) {
	s.t.Helper()
	for _, svc := range services {
		id := s.id(svc)
		var status string
		eventually(s.t, limit, svc+" healthy (last: "+status+")", func() bool {
			out, _ := s.run(30*time.Second, "docker", "inspect", "-f", "{{.State.Health.Status}}", id)
			status = strings.TrimSpace(out)
			return status == "healthy"
		})
	}
}

// url is an address of app-n (1..3) on its published loopback port.
func (s *stack) url(n int, path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", s.ports[n-1], path)
}

// call sends a request with a JSON body (nil: none) and the admin token, and
// returns the status, the error code of a refusal and the body.
func (s *stack) call(method, url string, body any) (int, string, []byte, error) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	var e struct {
		Error string `json:"error"`
	}
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(buf.Bytes(), &e)
	}
	return resp.StatusCode, e.Error, buf.Bytes(), nil
}

// sku is the product every order of the test buys, one unit at a time.
const sku = "stack-test"

// reset starts a clean sale of one product with stock units.
func (s *stack) reset(stock int) {
	s.t.Helper()
	body := map[string]any{"products": []map[string]any{{"sku": sku, "name": "compose test", "price_cents": 100, "stock": stock}}}
	if st, _, b, err := s.call(http.MethodPost, s.url(1, "/api/admin/reset"), body); err != nil || st != http.StatusOK {
		s.t.Fatalf("reset: %d %v %s", st, err, b)
	}
}

// order buys one unit on app-n.
func (s *stack) order(n int, user string) (int, string) {
	st, code, _, err := s.call(http.MethodPost, s.url(n, "/api/orders"), map[string]any{"sku": sku, "qty": 1, "user": user})
	if err != nil {
		return 0, err.Error()
	}
	return st, code
}

// audit is the admin audit of app-1: a real one, now.
type audit struct {
	OK            bool     `json:"ok"`
	SoldUnits     int64    `json:"sold_units"`
	OversoldUnits int64    `json:"oversold_units"`
	LostUpdates   int64    `json:"lost_updates"`
	Errors        []string `json:"errors"`
}

func (s *stack) audit() audit {
	s.t.Helper()
	st, _, b, err := s.call(http.MethodGet, s.url(1, "/api/admin/audit"), nil)
	if err != nil || st != http.StatusOK {
		s.t.Fatalf("audit: %d %v %s", st, err, b)
	}
	var a audit
	if err := json.Unmarshal(b, &a); err != nil {
		s.t.Fatalf("audit: %v: %s", err, b)
	}
	return a
}

// clean fails the test unless the audit is clean and nothing was oversold.
// An audit that could not read every node (a connection still on a node's
// address from before the network changed) is taken again until complete.
func (s *stack) clean(when string) audit {
	s.t.Helper()
	var a audit
	eventually(s.t, time.Minute, when+": a complete audit (last: "+fmt.Sprint(a.Errors)+")", func() bool {
		a = s.audit()
		return len(a.Errors) == 0
	})
	if !a.OK || a.OversoldUnits != 0 || a.LostUpdates != 0 {
		s.t.Errorf("%s: audit not clean: %+v", when, a)
	}
	return a
}

// shopper sends orders one after another to app-1..3 in turn until stopped
// (or max orders), and keeps every answer in order.
type shopper struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type answer struct {
	app, status int
	code        string
}

func (s *stack) shop(max int, apps ...int) *shopper {
	sh := &shopper{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sh.done)
		for i := 0; i < max; i++ {
			select {
			case <-sh.stop:
				return
			default:
			}
			n := apps[i%len(apps)]
			st, code := s.order(n, "shopper-"+strconv.Itoa(i%50))
			sh.mu.Lock()
			sh.answers = append(sh.answers, answer{n, st, code})
			sh.mu.Unlock()
		}
	}()
	return sh
}

// mark is the number of answers so far: answers after it came from orders
// sent after whatever the test did before taking it (or were in flight).
func (sh *shopper) mark() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.answers)
}

// since is the answers from mark on.
func (sh *shopper) since(mark int) []answer {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return append([]answer(nil), sh.answers[min(mark, len(sh.answers)):]...)
}

// halt stops the shopper and waits for its last answer; again is a no-op.
func (sh *shopper) halt() {
	sh.once.Do(func() { close(sh.stop) })
	<-sh.done
}

// count is how many answers match.
func count(as []answer, match func(answer) bool) int {
	n := 0
	for _, a := range as {
		if match(a) {
			n++
		}
	}
	return n
}

func sold(a answer) bool { return a.status == http.StatusCreated }

// failed is an answer no fault may cause: a 500, or no answer at all.
func failed(a answer) bool {
	return a.status == 0 || (a.status >= 500 && a.status != http.StatusServiceUnavailable)
}

// projectLeft lists the containers, networks and volumes of the project.
func (s *stack) projectLeft() string {
	label := "label=com.docker.compose.project=" + s.project
	var left []string
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		out := s.docker(append(kind, "--filter", label)...)
		if out != "" {
			left = append(left, kind[0]+": "+strings.ReplaceAll(out, "\n", " "))
		}
	}
	return strings.Join(left, "; ")
}

// down removes the project, volumes included; leftovers of an earlier run
// are removed the same way before the test starts.
func (s *stack) down() {
	if out, err := s.run(3*time.Minute, s.composeArgs("--profile", "loadtest", "down", "-v", "--remove-orphans", "-t", "5")...); err != nil {
		s.t.Logf("down: %v\n%s", err, tail(out, 2000))
	}
	// A partition network the test made, if a failure left it behind.
	_, _ = s.run(time.Minute, "docker", "network", "rm", s.project+"-partition")
}
