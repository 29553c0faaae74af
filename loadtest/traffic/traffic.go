// Package traffic is what the load runner sends and what it makes of the
// answers: the targeter that shapes a mix of purchases and seat grabs, the
// capped pacer, the attack itself, and the tally that counts every answer
// and cross-checks it against the database audit.
package traffic

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"flashsale/loadtest/linear"
	"flashsale/loadtest/storefront"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Mix is the shape of the traffic: which share of requests goes where.
type Mix struct {
	// HotSKU is the scarce product everybody wants: it sells out, which is
	// where overselling shows.
	HotSKU string `json:"hot_sku"`
	// BulkSKUs never sell out in a run; they carry the throughput.
	BulkSKUs []string `json:"bulk_skus"`
	// Event and Seats are the seat map that seat grabs compete for.
	Event string   `json:"event"`
	Seats []string `json:"seats"`
	// SeatShare is the share of requests that grab a seat; the rest buy.
	SeatShare float64 `json:"seat_share"`
	// HotShare is the share of purchases that go to HotSKU.
	HotShare float64 `json:"hot_share"`
	// DuplicateShare is the share of requests that resend an earlier
	// request, same body and same Idempotency-Key, to prove idempotency.
	DuplicateShare float64 `json:"duplicate_share"`
	// MultiShare is the share of orders for 2 or 3 units (as many of
	// each); the rest are for one.
	MultiShare float64 `json:"multi_share"`
}

// Traffic generates one cell's requests: each one a distinct user u<N> with
// its own Idempotency-Key, spread round-robin over the app instances, with
// the variant named in X-Lock-Variant. The sequence of requests is fixed by
// the seed, so every variant of a scenario gets the same traffic.
type Traffic struct {
	bases    []string
	variants []string
	mix      Mix
	tag      string

	mu   sync.Mutex
	rng  *rand.Rand
	n    int
	sent []vegeta.Target // every distinct request, for duplicates
	// asked is what each Idempotency-Key's request asked for, when kept
	// (KeepAsked): a result carries its URL but not its body, and a
	// history needs both.
	asked map[string]linear.Request
}

// NewTraffic returns the traffic for one cell. bases are the instances'
// base URLs ("http://127.0.0.1:port"); requests name the variants in turn
// (one for a cell; all of them to warm up); tag makes this cell's keys
// unique.
func NewTraffic(bases []string, variants []string, mix Mix, seed uint64, tag string) (*Traffic, error) {
	if len(bases) == 0 {
		return nil, fmt.Errorf("no target instances")
	}
	if len(variants) == 0 {
		return nil, fmt.Errorf("no lock variant")
	}
	for _, b := range bases {
		if err := storefront.Loopback(b); err != nil {
			return nil, err
		}
	}
	if mix.HotSKU == "" && len(mix.BulkSKUs) == 0 && mix.SeatShare < 1 {
		return nil, fmt.Errorf("no product to buy")
	}
	if mix.SeatShare > 0 && (mix.Event == "" || len(mix.Seats) == 0) {
		return nil, fmt.Errorf("seat grabs asked for, but no seats")
	}
	return &Traffic{
		bases:    bases,
		variants: variants,
		mix:      mix,
		tag:      tag,
		rng:      rand.New(rand.NewPCG(seed, seed^0x5eed)),
	}, nil
}

// orderBody and seatBody are the request bodies of docs/design.md's contract.
type orderBody struct {
	SKU  string `json:"sku"`
	Qty  int    `json:"qty"`
	User string `json:"user"`
}

type seatBody struct {
	User string `json:"user"`
}

// KeyFragment carries a request's Idempotency-Key in the URL fragment. A
// fragment is never sent to the server, but vegeta keeps the target URL in
// each Result: so the results file itself says which key every response
// answered, without trusting the app to echo it.
const KeyFragment = "key="

// Targeter returns the vegeta Targeter. It never fails: a Targeter error
// stops the whole attack in vegeta v12, so the request cap lives in the
// pacer (CappedPacer) instead.
func (t *Traffic) Targeter() vegeta.Targeter {
	return func(tgt *vegeta.Target) error {
		t.mu.Lock()
		defer t.mu.Unlock()
		i := t.n
		t.n++
		base := t.bases[i%len(t.bases)]
		if len(t.sent) > 0 && t.rng.Float64() < t.mix.DuplicateShare {
			// A retry of an earlier request, possibly to another instance:
			// same path, body and key, so it must not make a second order.
			prev := t.sent[t.rng.IntN(len(t.sent))]
			*tgt = prev
			tgt.URL = base + prev.URL[strings.Index(prev.URL, "/api/"):]
			tgt.Header = prev.Header.Clone()
			return nil
		}
		key := fmt.Sprintf("lt-%s-%d", t.tag, i)
		user := fmt.Sprintf("u%d", i)
		var path string
		var body []byte
		if t.rng.Float64() < t.mix.SeatShare {
			seat := t.mix.Seats[t.rng.IntN(len(t.mix.Seats))]
			path = "/api/events/" + url.PathEscape(t.mix.Event) + "/seats/" + url.PathEscape(seat)
			body, _ = json.Marshal(seatBody{User: user}) // a struct of strings always marshals
			t.ask(key, linear.Request{Event: t.mix.Event, Seat: seat, User: user, Key: key})
		} else {
			sku := t.mix.HotSKU
			if sku == "" || (len(t.mix.BulkSKUs) > 0 && t.rng.Float64() >= t.mix.HotShare) {
				sku = t.mix.BulkSKUs[t.rng.IntN(len(t.mix.BulkSKUs))]
			}
			qty := 1
			if t.mix.MultiShare > 0 && t.rng.Float64() < t.mix.MultiShare {
				qty = 2 + t.rng.IntN(2)
			}
			path = "/api/orders"
			body, _ = json.Marshal(orderBody{SKU: sku, Qty: qty, User: user})
			t.ask(key, linear.Request{SKU: sku, Qty: int64(qty), User: user, Key: key})
		}
		*tgt = vegeta.Target{
			Method: http.MethodPost,
			URL:    base + path + "#" + KeyFragment + key,
			Body:   body,
			Header: http.Header{
				"Content-Type":    {"application/json"},
				"X-Lock-Variant":  {t.variants[i%len(t.variants)]},
				"Idempotency-Key": {key},
			},
		}
		if t.mix.DuplicateShare > 0 { // kept only to be resent: at a spike's peak they are thousands a second
			t.sent = append(t.sent, *tgt)
		}
		return nil
	}
}

// KeepAsked keeps what every request asks for from now on, for Asked: a
// cell's history needs it; a sweep's minutes at thousands a second do not.
func (t *Traffic) KeepAsked() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.asked == nil {
		t.asked = map[string]linear.Request{}
	}
}

func (t *Traffic) ask(key string, r linear.Request) {
	if t.asked != nil {
		t.asked[key] = r
	}
}

// Asked is what the request of a result (by its URL) asked for; false for
// a URL this traffic did not send.
func (t *Traffic) Asked(rawURL string) (linear.Request, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.asked[keyOf(rawURL)]
	return r, ok
}

// keyOf is the Idempotency-Key a result's request carried, from the URL
// fragment the Targeter put there.
func keyOf(rawURL string) string {
	_, frag, ok := strings.Cut(rawURL, "#")
	if !ok {
		return ""
	}
	return strings.TrimPrefix(frag, KeyFragment)
}

// CappedPacer paces at rate and stops after max hits, so an attack is
// bounded by its duration and by a request cap. A zero rate would be
// unbounded in vegeta, so it is refused.
func CappedPacer(rate vegeta.Rate, max uint64) (vegeta.Pacer, error) {
	if rate.Freq <= 0 || rate.Per <= 0 {
		return nil, fmt.Errorf("rate must be positive, got %v", rate)
	}
	if max == 0 {
		return nil, fmt.Errorf("request cap must be positive")
	}
	return cappedPacer{Pacer: rate, max: max}, nil
}

// cappedPacer is a named type rather than a vegeta.PacerFunc because in
// v12.12.0 PacerFunc lacks the Rate method and so is not a Pacer.
type cappedPacer struct {
	vegeta.Pacer
	max uint64
}

// Pace stops at the cap and otherwise paces as the wrapped pacer does.
func (p cappedPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= p.max {
		return 0, true
	}
	return p.Pacer.Pace(elapsed, hits)
}
