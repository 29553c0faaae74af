package traffic

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func testMix() Mix {
	return Mix{
		HotSKU: "hot", BulkSKUs: []string{"b1", "b2"}, Event: "gala", Seats: []string{"A1", "A2", "A3"},
		SeatShare: 0.2, HotShare: 0.5, DuplicateShare: 0.1,
	}
}

func draw(t *testing.T, tr *Traffic, n int) []vegeta.Target {
	t.Helper()
	targeter := tr.Targeter()
	out := make([]vegeta.Target, n)
	for i := range out {
		if err := targeter(&out[i]); err != nil {
			t.Fatalf("target %d: %v", i, err)
		}
	}
	return out
}

func TestTrafficIsSeededAndSpread(t *testing.T) {
	bases := []string{"http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"}
	a, err := NewTraffic(bases, []string{"redlock"}, testMix(), 7, "t")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewTraffic(bases, []string{"redlock"}, testMix(), 7, "t")
	ta, tb := draw(t, a, 500), draw(t, b, 500)
	var seats, hot, dups int
	keys := map[string]vegeta.Target{}
	for i := range ta {
		if !ta[i].Equal(&tb[i]) {
			t.Fatalf("request %d differs between two runs with one seed:\n%+v\n%+v", i, ta[i], tb[i])
		}
		tg := ta[i]
		if want := bases[i%len(bases)]; !strings.HasPrefix(tg.URL, want+"/api/") {
			t.Errorf("request %d goes to %s, want round-robin base %s", i, tg.URL, want)
		}
		if tg.Method != http.MethodPost || tg.Header.Get("X-Lock-Variant") != "redlock" || tg.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: method %s, headers %v", i, tg.Method, tg.Header)
		}
		key := tg.Header.Get("Idempotency-Key")
		if key == "" || keyOf(tg.URL) != key {
			t.Errorf("request %d: key %q, fragment key %q", i, key, keyOf(tg.URL))
		}
		if prev, seen := keys[key]; seen {
			// A duplicate: same route, body and key, so it must replay.
			dups++
			if !strings.HasSuffix(tg.URL, prev.URL[strings.Index(prev.URL, "/api/"):]) || string(tg.Body) != string(prev.Body) {
				t.Errorf("duplicate of %s differs: %s %s vs %s %s", key, tg.URL, tg.Body, prev.URL, prev.Body)
			}
			continue
		}
		keys[key] = tg
		if isSeat(tg.URL) {
			seats++
			continue
		}
		var body orderBody
		if err := json.Unmarshal(tg.Body, &body); err != nil || body.Qty != 1 || body.User == "" {
			t.Errorf("order body %s: %v", tg.Body, err)
		}
		if body.SKU == "hot" {
			hot++
		}
	}
	// Loose bounds: the shares are probabilities, the seed fixes the draw.
	if dups < 25 || dups > 80 {
		t.Errorf("%d duplicates of 500, want about 10%%", dups)
	}
	if seats < 60 || seats > 140 {
		t.Errorf("%d seat grabs, want about 20%% of the distinct requests", seats)
	}
	if hot < 120 || hot > 240 {
		t.Errorf("%d hot purchases, want about half of the purchases", hot)
	}
	users := map[string]bool{}
	for _, tg := range keys {
		var u struct{ User string }
		_ = json.Unmarshal(tg.Body, &u)
		if users[u.User] {
			t.Errorf("user %s appears in two distinct requests", u.User)
		}
		users[u.User] = true
	}
}

func TestTrafficRefusesNonLoopback(t *testing.T) {
	for _, base := range []string{"http://example.com", "http://10.0.0.1:80", "http://127.evil.example:80", "ftp://127.0.0.1"} {
		if _, err := NewTraffic([]string{base}, []string{"none"}, testMix(), 1, "t"); err == nil {
			t.Errorf("%s: accepted", base)
		}
	}
	for _, base := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:1", "https://127.0.0.2"} {
		if _, err := NewTraffic([]string{base}, []string{"none"}, testMix(), 1, "t"); err != nil {
			t.Errorf("%s: %v", base, err)
		}
	}
}

func TestCappedPacer(t *testing.T) {
	if _, err := CappedPacer(vegeta.Rate{Freq: 0, Per: time.Second}, 10); err == nil {
		t.Error("a zero rate (unbounded in vegeta) was accepted")
	}
	if _, err := CappedPacer(vegeta.Rate{Freq: 10, Per: time.Second}, 0); err == nil {
		t.Error("a zero cap was accepted")
	}
	p, err := CappedPacer(vegeta.Rate{Freq: 100, Per: time.Second}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, stop := p.Pace(0, 4); stop {
		t.Error("stopped before the cap")
	}
	if _, stop := p.Pace(0, 5); !stop {
		t.Error("did not stop at the cap")
	}
	if r := p.Rate(0); r != 100 {
		t.Errorf("rate %v, want 100", r)
	}
}

// TestMultiUnitOrders: a share of the orders is for 2 or 3 units, both
// come up, and what the history is told each request asked matches its
// body and carries its key.
func TestMultiUnitOrders(t *testing.T) {
	mix := testMix()
	mix.SeatShare, mix.DuplicateShare, mix.MultiShare = 0, 0, 0.3
	tr, err := NewTraffic([]string{"http://127.0.0.1:1"}, []string{"lua"}, mix, 11, "t")
	if err != nil {
		t.Fatal(err)
	}
	tr.KeepAsked()
	byQty := map[int]int{}
	for _, tg := range draw(t, tr, 1000) {
		var body orderBody
		if err := json.Unmarshal(tg.Body, &body); err != nil {
			t.Fatal(err)
		}
		byQty[body.Qty]++
		asked, ok := tr.Asked(tg.URL)
		if !ok || asked.Qty != int64(body.Qty) || asked.Key != tg.Header.Get("Idempotency-Key") || asked.User != body.User {
			t.Errorf("asked %+v for body %s, key %s", asked, tg.Body, tg.Header.Get("Idempotency-Key"))
		}
	}
	if byQty[1]+byQty[2]+byQty[3] != 1000 || byQty[2] < 100 || byQty[3] < 100 || byQty[2]+byQty[3] > 400 {
		t.Errorf("orders by units %v, want about 30%% for 2 or 3, as many of each", byQty)
	}
}
