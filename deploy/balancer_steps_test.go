package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The balancer's steps of TestComposeStack: orders through the shop's one
// address, the live stream through it, a replica stopped gracefully and one
// killed under load.

// lb is an address of the balancer on its published loopback port.
func (s *stack) lb(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", s.lbPort, path)
}

// server is one replica as the balancer's backend apps sees it.
type server struct {
	status string // UP, DOWN, "UP 1/2" (going down), …
	total  int    // sessions (requests' connections) it was ever sent: stot
}

// balancer reads the balancer's stats (CSV) for backend apps.
func (s *stack) balancer() (map[string]server, error) {
	resp, err := s.http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats;csv", s.lbStats))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := csv.NewReader(resp.Body)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("stats CSV: %v", err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[strings.TrimPrefix(name, "# ")] = i
	}
	out := map[string]server{}
	for _, row := range rows[1:] {
		if len(row) <= col["status"] || row[col["pxname"]] != "apps" || !strings.HasPrefix(row[col["svname"]], "app-") {
			continue
		}
		total, _ := strconv.Atoi(row[col["stot"]])
		out[row[col["svname"]]] = server{status: row[col["status"]], total: total}
	}
	return out, nil
}

// balancerSees waits until the balancer gives each replica the status.
func (s *stack) balancerSees(limit time.Duration, status string, apps ...string) {
	s.t.Helper()
	var last map[string]server
	eventually(s.t, limit, fmt.Sprintf("the balancer sees %v %s (last: %v)", apps, status, last), func() bool {
		var err error
		if last, err = s.balancer(); err != nil {
			return false
		}
		for _, a := range apps {
			if last[a].status != status {
				return false
			}
		}
		return true
	})
}

// lbAnswer is one order's answer through the balancer.
type lbAnswer struct {
	status int
	code   string
	server string // X-Served-By: the replica that answered, "" if none did
}

// lbFailed is an answer the shop never gives: no answer, a 5xx other than
// the shop's own 503s (which carry an error code: the balancer's 502, 503
// and 504 do not).
func lbFailed(a lbAnswer) bool {
	return a.status == 0 || (a.status >= 500 && (a.status != http.StatusServiceUnavailable || a.code == ""))
}

// orderLB buys one unit through the balancer.
func (s *stack) orderLB(user string) lbAnswer {
	st, code, hdr, _, err := s.callLB(http.MethodPost, "/api/orders", map[string]any{"sku": sku, "qty": 1, "user": user})
	if err != nil {
		return lbAnswer{code: err.Error()}
	}
	return lbAnswer{status: st, code: code, server: hdr.Get("X-Served-By")}
}

// callLB sends a request through the balancer with a JSON body (nil:
// none) and the admin token; it returns the status, the error code of a
// refusal, the headers and the body.
func (s *stack) callLB(method, path string, body any) (int, string, http.Header, []byte, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.lb(path), rd)
	if err != nil {
		return 0, "", nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, "", nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", nil, nil, err
	}
	var e struct {
		Error string `json:"error"`
	}
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(b, &e)
	}
	return resp.StatusCode, e.Error, resp.Header, b, nil
}

// lbShopper is workers shoppers buying through the balancer at once.
type lbShopper struct {
	mu      sync.Mutex
	answers []lbAnswer
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// shopLB starts workers shoppers; each buys until stopped, until it is told
// sold_out, or until max orders were sent in all.
func (s *stack) shopLB(workers, max int) *lbShopper {
	sh := &lbShopper{stop: make(chan struct{})}
	var sent sync.Mutex
	n := 0
	for w := range workers {
		sh.wg.Go(func() {
			for {
				select {
				case <-sh.stop:
					return
				default:
				}
				sent.Lock()
				n++
				over := n > max
				sent.Unlock()
				if over {
					return
				}
				a := s.orderLB("lb-shopper-" + strconv.Itoa(w))
				sh.mu.Lock()
				sh.answers = append(sh.answers, a)
				sh.mu.Unlock()
				if a.code == "sold_out" {
					return
				}
			}
		})
	}
	return sh
}

func (sh *lbShopper) mark() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.answers)
}

func (sh *lbShopper) since(mark int) []lbAnswer {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return slices.Clone(sh.answers[min(mark, len(sh.answers)):])
}

// wait waits until every shopper is done by itself.
func (sh *lbShopper) wait() { sh.wg.Wait() }

// halt stops the shoppers and waits for their last answers.
func (sh *lbShopper) halt() {
	sh.once.Do(func() { close(sh.stop) })
	sh.wg.Wait()
}

func countLB(as []lbAnswer, match func(lbAnswer) bool) int {
	n := 0
	for _, a := range as {
		if match(a) {
			n++
		}
	}
	return n
}

func soldLB(a lbAnswer) bool { return a.status == http.StatusCreated }

// resetLB starts a clean sale through the balancer (the admin API behind it).
func (s *stack) resetLB(stock int) {
	s.t.Helper()
	body := map[string]any{"products": []map[string]any{{"sku": sku, "name": "compose test", "price_cents": 100, "stock": stock}}}
	if st, _, _, b, err := s.callLB(http.MethodPost, "/api/admin/reset", body); err != nil || st != http.StatusOK {
		s.t.Fatalf("reset through the balancer: %d %v %s", st, err, b)
	}
}

// auditLB is the admin audit through the balancer, taken until complete.
func (s *stack) auditLB(when string) audit {
	s.t.Helper()
	var a audit
	eventually(s.t, time.Minute, when+": a complete audit through the balancer", func() bool {
		st, _, _, b, err := s.callLB(http.MethodGet, "/api/admin/audit", nil)
		if err != nil || st != http.StatusOK || json.Unmarshal(b, &a) != nil {
			return false
		}
		return len(a.Errors) == 0
	})
	if !a.OK || a.OversoldUnits != 0 || a.LostUpdates != 0 {
		s.t.Errorf("%s: audit not clean: %+v", when, a)
	}
	return a
}

const lbWorkers = 6 // concurrent shoppers through the balancer: bounded load

// 2a. Shoppers through the balancer, spread over the three replicas by it,
// buy until told sold_out: exactly the stock sells.
func stepBalancerSellsExactly(s *stack) {
	const stock = 150
	s.resetLB(stock)
	sh := s.shopLB(lbWorkers, 20*stock)
	sh.wait()
	all := sh.since(0)
	by := map[string]int{}
	for _, a := range all {
		if soldLB(a) {
			by[a.server]++
		}
	}
	s.t.Logf("%d answers; units sold by replica: %v", len(all), by)
	if got := countLB(all, soldLB); got != stock {
		s.t.Errorf("through the balancer %d units sold, want exactly the stock %d", got, stock)
	}
	if n := countLB(all, func(a lbAnswer) bool { return a.code == "sold_out" }); n != lbWorkers {
		s.t.Errorf("%d shoppers were told sold_out, want all %d", n, lbWorkers)
	}
	for _, app := range appServices3 {
		if by[app] == 0 {
			s.t.Errorf("the balancer sent no sale to %s (sales by replica: %v)", app, by)
		}
	}
	if n := countLB(all, lbFailed); n > 0 {
		s.t.Errorf("%d orders failed outright through the balancer", n)
	}
	if a := s.auditLB("after the sell-out"); a.SoldUnits != stock {
		s.t.Errorf("the audit counts %d units sold, want %d", a.SoldUnits, stock)
	}
}

// 2b. A client of the live stream through the balancer sees every sale, in
// order, before the next one is made: a stream the balancer held back would
// stop this at the first sale. The sales go through the balancer too, so
// most are made on replicas other than the stream's. The delay from each
// sale's answer to its event is measured; its median must be under a
// second (the worst is logged: one slow moment on a busy machine is not a
// buffered stream).
func stepBalancerStream(s *stack) {
	const stock, sales = 1000, 12
	s.resetLB(stock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.lb("/api/stream"), nil)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		s.t.Fatalf("stream through the balancer: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		s.t.Fatalf("stream through the balancer: %d %s", resp.StatusCode, ct)
	}
	streamServer := resp.Header.Get("X-Served-By")
	type event struct {
		stock int64
		at    time.Time
	}
	events := make(chan event, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var c struct {
				Type  string `json:"type"`
				SKU   string `json:"sku"`
				Stock *int64 `json:"stock"`
			}
			if json.Unmarshal([]byte(data), &c) == nil && c.Type == "stock" && c.SKU == sku && c.Stock != nil {
				events <- event{*c.Stock, time.Now()}
			}
		}
	}()

	var delays []time.Duration
	elsewhere := 0
	for k := 1; k <= sales; k++ {
		a := s.orderLB("stream-buyer")
		acked := time.Now()
		if !soldLB(a) {
			s.t.Fatalf("sale %d through the balancer: %d %s", k, a.status, a.code)
		}
		if a.server != streamServer {
			elsewhere++
		}
		select {
		case e, ok := <-events:
			if !ok {
				s.t.Fatalf("the stream ended before sale %d's event", k)
			}
			if want := int64(stock - k); e.stock != want {
				s.t.Fatalf("after sale %d the stream says stock %d, want %d (events out of order or lost)", k, e.stock, want)
			}
			delays = append(delays, max(e.at.Sub(acked), 0))
		case <-time.After(15 * time.Second):
			s.t.Fatalf("sale %d (on %s): no event within 15s through the balancer (stream on %s): the stream is held back", k, a.server, streamServer)
		}
	}
	select {
	case e := <-events:
		s.t.Errorf("an event nobody's sale made: stock %d", e.stock)
	default:
	}
	sorted := slices.Clone(delays)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	median, worst := sorted[len(sorted)/2], sorted[len(sorted)-1]
	s.t.Logf("stream on %s, %d of %d sales on another replica; sale → event: median %v, worst %v", streamServer, elsewhere, sales, median.Round(time.Millisecond), worst.Round(time.Millisecond))
	if elsewhere == 0 {
		s.t.Errorf("every sale was made on the stream's replica %s: the balancer does not spread", streamServer)
	}
	if median > time.Second {
		s.t.Errorf("sale → event median %v through the balancer, want under 1s (all: %v)", median, delays)
	}
}

// 2c. docker compose stop app-2 while shoppers buy through the balancer:
// app-2 answers /readyz 503 and keeps serving, the balancer takes it out
// on that (its log says why: a 503, not a refused connection), in-flight
// sales finish; no order fails, and the audit counts exactly what was
// acknowledged. Then app-2 starts again and the balancer takes it back.
func stepBalancerGracefulStop(s *stack) {
	s.resetLB(1_000_000)
	sh := s.shopLB(lbWorkers, 100_000)
	defer sh.halt()
	eventually(s.t, time.Minute, "sales through the balancer", func() bool { return countLB(sh.since(0), soldLB) >= 30 })

	since := strconv.FormatInt(time.Now().Unix()-1, 10)
	start := time.Now()
	s.must(2*time.Minute, "stop", "app-2")
	s.t.Logf("stop app-2 (drain and shutdown): %s", time.Since(start).Round(100*time.Millisecond))
	m := sh.mark()
	eventually(s.t, time.Minute, "sales go on without app-2", func() bool { return countLB(sh.since(m), soldLB) >= 30 })
	sh.halt()

	all := sh.since(0)
	for _, a := range all {
		if lbFailed(a) {
			s.t.Errorf("an order answered %d %q (by %q) while app-2 stopped gracefully", a.status, a.code, a.server)
		}
	}
	if n := countLB(sh.since(m), func(a lbAnswer) bool { return a.server == "app-2" }); n > 0 {
		s.t.Errorf("%d orders were answered by app-2 after it stopped", n)
	}
	a := s.auditLB("after app-2 stopped")
	if got := int64(countLB(all, soldLB)); a.SoldUnits != got {
		s.t.Errorf("the audit counts %d units sold, the shoppers were acknowledged %d", a.SoldUnits, got)
	}
	logs, _ := s.run(time.Minute, "docker", "logs", "--since", since, s.id("balancer"))
	down := ""
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "apps/app-2 is DOWN") {
			down = line
			break
		}
	}
	s.t.Logf("balancer: %s", strings.TrimSpace(down))
	if !strings.Contains(down, "code: 503") {
		s.t.Errorf("the balancer took app-2 out for %q, want its /readyz 503 (draining), before it stopped accepting", down)
	}

	s.must(2*time.Minute, "start", "app-2")
	s.healthy(2*time.Minute, "app-2")
	s.balancerSees(time.Minute, "UP", "app-2")
}

// 2d. docker kill (SIGKILL) of app-2 under load: the orders it held fail
// (502 from the balancer, at most one per shopper), the balancer marks it
// down after its failed checks (inter 1s, fall 2: a few seconds) and sends
// it nothing after that; nothing acknowledged is lost. Then it starts again.
func stepBalancerKill(s *stack) {
	s.resetLB(1_000_000)
	sh := s.shopLB(lbWorkers, 100_000)
	defer sh.halt()
	eventually(s.t, time.Minute, "sales through the balancer", func() bool { return countLB(sh.since(0), soldLB) >= 30 })

	id := s.id("app-2")
	s.docker("kill", id)
	killed := time.Now()
	s.balancerSees(30*time.Second, "DOWN", "app-2")
	s.t.Logf("the balancer marked app-2 down %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	before, err := s.balancer()
	if err != nil {
		s.t.Fatal(err)
	}
	m := sh.mark()
	eventually(s.t, time.Minute, "sales go on without app-2", func() bool { return countLB(sh.since(m), soldLB) >= 50 })
	sh.halt()
	after, err := s.balancer()
	if err != nil {
		s.t.Fatal(err)
	}
	if after["app-2"].total != before["app-2"].total {
		s.t.Errorf("the balancer sent app-2 %d connections after marking it down", after["app-2"].total-before["app-2"].total)
	}
	if state := s.docker("inspect", "-f", "{{.State.Status}}", id); state != "exited" {
		s.t.Errorf("app-2 is %s after docker kill, want exited (the check above needs it gone)", state)
	}
	for _, a := range sh.since(m) {
		if lbFailed(a) || a.server == "app-2" {
			s.t.Errorf("after app-2 was marked down an order answered %d %q by %q", a.status, a.code, a.server)
		}
	}
	all := sh.since(0)
	failed := countLB(all, lbFailed)
	s.t.Logf("%d of %d orders failed (held by app-2 when it died)", failed, len(all))
	if failed > lbWorkers {
		s.t.Errorf("%d orders failed; app-2 can have held at most %d (one per shopper)", failed, lbWorkers)
	}
	for _, a := range all {
		if a.status == http.StatusInternalServerError {
			s.t.Errorf("an order answered 500 %q by %q", a.code, a.server)
		}
	}
	// Each failed order may have sold before app-2 died: the audit counts
	// every acknowledged unit and at most those besides.
	acked := int64(countLB(all, soldLB))
	if a := s.auditLB("after app-2 was killed"); a.SoldUnits < acked || a.SoldUnits > acked+int64(failed) {
		s.t.Errorf("the audit counts %d units sold; acknowledged %d, unanswered %d", a.SoldUnits, acked, failed)
	}

	s.docker("start", id)
	s.healthy(2*time.Minute, "app-2")
	s.balancerSees(time.Minute, "UP", "app-2")
}
