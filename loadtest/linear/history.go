package linear

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Request is what one write asked for, as the traffic that sent it knows.
type Request struct {
	// SKU is set for an order, Event and Seat for a seat grab.
	SKU         string
	Qty         int64
	Event, Seat string
	User        string
	// Key is the request's Idempotency-Key: a resend carries its order's,
	// and an order and its resends are one operation. "" for none.
	Key string
}

func (r Request) key() string {
	if r.SKU != "" {
		return "sku " + r.SKU
	}
	return "seat " + r.Event + "/" + r.Seat
}

// never is the return time of an operation whose outcome is unknown: it
// may take effect at any time after its call, or never.
const never = math.MaxInt64

// History is a client-side history being recorded; safe for concurrent use.
type History struct {
	start   time.Time
	initial map[string]int64 // SKU → stock at the start

	mu sync.Mutex
	// reads are the stock and seat reads, and the operations of a history
	// read back from its file; writes every order and seat grab sent,
	// each resend on its own until ops makes one operation of them.
	reads   []porcupine.Operation
	writes  []attempt
	dropped int
	// orders is how many orders the store kept of a user, as Resolve
	// found them after the run.
	orders map[string]int
}

// attempt is one send of a write and its answer.
type attempt struct {
	in        Input
	idem      string // its Idempotency-Key; "" for none
	out       Output
	replay    bool // a 201 that answered with an earlier order of its key
	call, ret int64
}

// New starts a history of a sale whose SKUs start with initial stock (every
// seat starts free).
func New(initial map[string]int64) *History {
	return &History{start: time.Now(), initial: initial}
}

func (h *History) at(t time.Time) int64 { return int64(t.Sub(h.start)) }

// Answer records one send of a write: its request, when it was sent and
// answered, and the answer (code 0 when none came). An answer that says
// nothing took effect (a 4xx other than sold out and seat taken, a 503
// whose contract says nothing was sold) is left out: it tells nothing of
// the stock or the seat. Sends that share a user and an Idempotency-Key
// are one operation (ops); a replayed answer without a key is left out.
func (h *History) Answer(r Request, call time.Time, latency time.Duration, code uint16, header http.Header, body []byte) {
	in := Input{Key: r.key(), Qty: r.Qty, User: r.User}
	if r.SKU != "" {
		in.Kind, in.Initial = Buy, h.initial[r.SKU]
	} else {
		in.Kind = Grab
	}
	a := attempt{in: in, idem: r.Key, out: Output{Outcome: Maybe, Left: NotSaid}, call: h.at(call), ret: h.at(call.Add(latency))}
	switch {
	case code == http.StatusCreated && header.Get("Idempotent-Replay") == "true":
		a.out.Outcome, a.replay = Done, true
		if r.Key == "" {
			h.drop()
			return
		}
	case code == http.StatusCreated:
		a.out.Outcome = Done
		var o struct {
			Left *int64 `json:"stock_left"`
		}
		if json.Unmarshal(body, &o) == nil && o.Left != nil {
			a.out.Left = *o.Left
		}
	case code == 0 || code >= 500 && !nothingTaken(body):
		a.ret = never
	case code == http.StatusConflict && (errorCode(body) == "sold_out" || errorCode(body) == "seat_taken"):
		a.out.Outcome = Refused
	default:
		h.drop()
		return
	}
	h.mu.Lock()
	h.writes = append(h.writes, a)
	h.mu.Unlock()
}

func (h *History) read(in Input, out Output, call, ret int64) {
	h.mu.Lock()
	h.reads = append(h.reads, porcupine.Operation{Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

func (h *History) drop() {
	h.mu.Lock()
	h.dropped++
	h.mu.Unlock()
}

// nothingTaken reports whether a 5xx answer's contract says nothing was
// sold or booked (docs/api.md): a refusal before any write. Any other 5xx
// may have committed.
func nothingTaken(body []byte) bool {
	switch errorCode(body) {
	case "lock_busy", "overloaded", "lock_unavailable", "holder_crashed":
		return true
	}
	return false
}

func errorCode(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e) // a body that is not JSON has no code
	return e.Error
}

// Stock records a read of every SKU's stock, called at call and answered
// at ret.
func (h *History) Stock(call, ret time.Time, stock map[string]int64) {
	for sku, n := range stock {
		if _, ok := h.initial[sku]; !ok {
			continue
		}
		h.read(Input{Kind: StockRead, Key: "sku " + sku, Initial: h.initial[sku]}, Output{Left: n}, h.at(call), h.at(ret))
	}
}

// Seats records a read of an event's seat map: seat → holder ("" free).
func (h *History) Seats(call, ret time.Time, event string, holders map[string]string) {
	for seat, who := range holders {
		h.read(Input{Kind: SeatRead, Key: "seat " + event + "/" + seat}, Output{Holder: who}, h.at(call), h.at(ret))
	}
}

// jsonOp is one operation as WriteJSON writes it; return is null when the
// outcome is unknown.
type jsonOp struct {
	Op      string `json:"op"`
	Key     string `json:"key"`
	User    string `json:"user,omitempty"`
	Qty     int64  `json:"qty,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Left    *int64 `json:"stock,omitempty"`
	Holder  string `json:"holder,omitempty"`
	Why     string `json:"why,omitempty"`
	Initial int64  `json:"initial,omitempty"`
	Call    int64  `json:"call_ns"`
	Return  *int64 `json:"return_ns"`
}

var (
	kindNames    = [...]string{"buy", "read stock", "grab", "read seat"}
	outcomeNames = [...]string{"done", "refused", "unknown", "contradicted"}
)

// WriteJSON writes the history, one operation a line, times in
// nanoseconds from its start: what porcupine was given.
func (h *History) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, op := range h.snapshot() {
		in, out := op.Input.(Input), op.Output.(Output)
		j := jsonOp{Op: kindNames[in.Kind], Key: in.Key, User: in.User, Qty: in.Qty,
			Holder: out.Holder, Why: out.Why, Initial: in.Initial, Call: op.Call}
		if in.Kind == Buy || in.Kind == Grab {
			j.Outcome = outcomeNames[out.Outcome]
		}
		if out.Left != NotSaid && in.Kind != Grab && in.Kind != SeatRead {
			j.Left = &out.Left
		}
		if op.Return != never {
			j.Return = &op.Return
		}
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes the history to path as WriteJSON does, making its
// directory: the history a check that failed or ran out of time was given,
// to look into.
func (h *History) WriteFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := h.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Resolve looks up, after the run, the orders of every order that went
// without an answer at least once, as etcd's robustness tests patch their
// histories from what the store kept: orders says how many orders the store
// has of a user (every order here has a user of its own). An order none of
// whose sends was answered took effect at some moment after its first send
// when the store has it (its return stays open), and never when it has
// not, and is then left out; one the store has twice was sold twice, a
// contradiction whatever its answers. A user that cannot be looked up keeps
// what the shoppers saw. Without this, a few hundred unknown writes can
// each explain any gap, and the search tries their every subset.
func (h *History) Resolve(orders func(user string) (int, error)) (took, gone int) {
	h.mu.Lock()
	var users []string
	asked := map[string]bool{}
	for _, a := range h.writes {
		if a.in.Kind == Buy && a.ret == never && a.in.User != "" && !asked[a.in.User] {
			asked[a.in.User] = true
			users = append(users, a.in.User)
		}
	}
	h.mu.Unlock()
	found := map[string]int{}
	for _, u := range users {
		if n, err := orders(u); err == nil {
			found[u] = n
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.orders = found
	for _, g := range groups(h.writes) {
		if n, ok := found[g[0].in.User]; ok && g[0].in.Kind == Buy && !answered(g) {
			if n == 0 {
				gone++
			} else {
				took++
			}
		}
	}
	return took, gone
}
