package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"flashsale/internal/clock"
	"flashsale/loadtest"
	"flashsale/loadtest/checker"
	"flashsale/loadtest/linear"
)

// clients are the shoppers of a chaos run. Every answer is recorded
// in client.jsonl as the client saw it, for the checker's durability
// check: a 201 is a promise the database must keep.
type clients struct {
	bases []string
	// token is the instances' admin token: the seat map names each seat's
	// holder only to it, and the reads porcupine checks need the names.
	token string
	n     atomic.Uint64 // requests sent, for round-robin and unique keys

	mu     sync.Mutex
	out    io.Writer
	counts map[string]map[string]int // variant → status → answers
	// unanswered are, per variant, the requests the client gave up
	// waiting for, and how many.
	unanswered map[string][]loadtest.Unanswered
	hangs      map[string]int
	requests   map[string]*atomic.Int64
	// histories are what each variant's shoppers saw, for porcupine.
	histories map[string]*linear.History
}

// clientTimeout bounds one request: longer than any pause the nemesis
// makes, so a paused instance's answer is still waited for.
const clientTimeout = 15 * time.Second

var httpClient = &http.Client{
	Timeout:   clientTimeout,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
}

// maxInFlight bounds each variant's open requests: when an instance is
// paused its requests pile up, and the next ones are skipped, not queued.
const maxInFlight = 48

// buy sends rate purchases a second until ctx ends: nine in ten of the
// variant's hot SKU, the rest of its scarce one; a share multi of them for
// 2 or 3 units, the rest for one.
func (c *clients) buy(ctx context.Context, variant string, skus []string, rate int, multi float64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	slots := make(chan struct{}, maxInFlight)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sku := skus[0]
		if rng.IntN(10) == 0 {
			sku = skus[1]
		}
		qty := 1
		if multi > 0 && rng.Float64() < multi {
			qty = 2 + rng.IntN(2)
		}
		select {
		case slots <- struct{}{}:
		default:
			continue // an instance is stuck; do not pile up
		}
		wg.Go(func() {
			defer func() { <-slots }()
			c.send(variant, "order", "/api/orders", map[string]any{"sku": sku, "qty": qty}, linear.Request{SKU: sku, Qty: int64(qty)})
		})
	}
}

// grab walks the variant's seats over the run: every seat in turn gets
// three grabs at once, one from each instance, so a broken lock has a
// real race to lose.
func (c *clients) grab(ctx context.Context, variant, event string, seats []string, d time.Duration) {
	if len(seats) == 0 {
		return
	}
	every := d / time.Duration(len(seats))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, seat := range seats {
		for range len(c.bases) {
			wg.Go(func() {
				c.send(variant, "seat", "/api/events/"+event+"/seats/"+seat, map[string]any{}, linear.Request{Event: event, Seat: seat})
			})
		}
		if !clock.Sleep(ctx, every) {
			return
		}
	}
}

// send makes one request on the next instance and records its answer.
// The request's context is not the run's: a request sent is waited for,
// so its answer is known.
func (c *clients) send(variant, op, path string, body map[string]any, asked linear.Request) {
	n := c.n.Add(1)
	c.requests[variant].Add(1)
	key := fmt.Sprintf("chaos-%d", n)
	body["user"] = fmt.Sprintf("u%d", n)
	asked.User, asked.Key = body["user"].(string), key
	b, _ := json.Marshal(body) // strings and numbers always encode
	base := c.bases[int(n)%len(c.bases)]
	status := 0
	var answer []byte
	var header http.Header
	call := time.Now()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Lock-Variant", variant)
		req.Header.Set("Idempotency-Key", key)
		var res *http.Response
		if res, err = httpClient.Do(req); err == nil {
			answer, err = io.ReadAll(io.LimitReader(res.Body, 64<<10))
			res.Body.Close()
			status, header = res.StatusCode, res.Header
			if err != nil {
				status = 0 // an answer cut short says nothing of what happened
			}
		}
	}
	waited := time.Since(call)
	if h := c.histories[variant]; h != nil {
		h.Answer(asked, call, waited, uint16(status), header, answer)
	}
	line, _ := json.Marshal(checker.Record{Time: time.Now(), Kind: "ack", Op: op, Variant: variant, Status: status, IdempotencyKey: key})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts[variant] == nil {
		c.counts[variant] = map[string]int{}
	}
	c.counts[variant][fmt.Sprint(status)]++
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		if c.unanswered == nil {
			c.unanswered, c.hangs = map[string][]loadtest.Unanswered{}, map[string]int{}
		}
		c.hangs[variant]++
		c.unanswered[variant] = loadtest.NameUnanswered(c.unanswered[variant],
			loadtest.Unanswered{Request: loadtest.DescribeRequest(asked) + " to " + base, Waited: waited, Error: err.Error()})
	}
	_, _ = c.out.Write(append(line, '\n')) // a lost line shows as a missing ack, never a false one
}
