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

	mu      sync.Mutex
	ops     []porcupine.Operation
	writes  int
	maybe   int
	dropped int
}

// New starts a history of a sale whose SKUs start with initial stock (every
// seat starts free).
func New(initial map[string]int64) *History {
	return &History{start: time.Now(), initial: initial}
}

func (h *History) at(t time.Time) int64 { return int64(t.Sub(h.start)) }

func (h *History) add(in Input, out Output, call, ret int64) {
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

// Answer records one write: its request, when it was sent and answered,
// and the answer (code 0 when none came). An answer that says nothing
// took effect (a 4xx other than sold out and seat taken, a 503 whose
// contract says nothing was sold) is left out: it tells nothing of the
// stock or the seat. So is a replayed answer: it is the earlier request's.
func (h *History) Answer(r Request, call time.Time, latency time.Duration, code uint16, header http.Header, body []byte) {
	in := Input{Key: r.key(), Qty: r.Qty, User: r.User}
	if r.SKU != "" {
		in.Kind, in.Initial = Buy, h.initial[r.SKU]
	} else {
		in.Kind = Grab
	}
	out := Output{Outcome: Maybe, Left: NotSaid}
	c, ret := h.at(call), h.at(call.Add(latency))
	switch {
	case code == http.StatusCreated && header.Get("Idempotent-Replay") == "true":
		h.drop()
		return
	case code == http.StatusCreated:
		out.Outcome = Done
		var o struct {
			Left *int64 `json:"stock_left"`
		}
		if json.Unmarshal(body, &o) == nil && o.Left != nil {
			out.Left = *o.Left
		}
	case code == 0 || code >= 500 && !nothingTaken(body):
		ret = never
	case code == http.StatusConflict && (errorCode(body) == "sold_out" || errorCode(body) == "seat_taken"):
		out.Outcome = Refused
	default:
		h.drop()
		return
	}
	h.mu.Lock()
	h.writes++
	if ret == never {
		h.maybe++
	}
	h.mu.Unlock()
	h.add(in, out, c, ret)
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
		h.add(Input{Kind: StockRead, Key: "sku " + sku, Initial: h.initial[sku]}, Output{Left: n}, h.at(call), h.at(ret))
	}
}

// Seats records a read of an event's seat map: seat → holder ("" free).
func (h *History) Seats(call, ret time.Time, event string, holders map[string]string) {
	for seat, who := range holders {
		h.add(Input{Kind: SeatRead, Key: "seat " + event + "/" + seat}, Output{Holder: who}, h.at(call), h.at(ret))
	}
}

// Size is how many operations the history holds, how many of them are
// writes, how many writes have an unknown outcome, and how many answers
// were left out.
func (h *History) Size() (ops, writes, maybe, dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops), h.writes, h.maybe, h.dropped
}

func (h *History) snapshot() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// jsonOp is one operation as WriteJSON writes it; return is null when the
// outcome is unknown.
type jsonOp struct {
	Kind    string `json:"op"`
	Key     string `json:"key"`
	User    string `json:"user,omitempty"`
	Qty     int64  `json:"qty,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Left    *int64 `json:"stock,omitempty"`
	Holder  string `json:"holder,omitempty"`
	Call    int64  `json:"call_ns"`
	Return  *int64 `json:"return_ns"`
}

// WriteJSON writes the history, one operation a line, times in
// nanoseconds from its start: what porcupine was given.
func (h *History) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, op := range h.snapshot() {
		in, out := op.Input.(Input), op.Output.(Output)
		j := jsonOp{Kind: [...]string{"buy", "read stock", "grab", "read seat"}[in.Kind], Key: in.Key, User: in.User, Qty: in.Qty,
			Holder: out.Holder, Call: op.Call}
		if in.Kind == Buy || in.Kind == Grab {
			j.Outcome = [...]string{"done", "refused", "unknown"}[out.Outcome]
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

// Resolve settles the orders whose outcome the shopper could not know, as
// etcd's robustness tests patch theirs from what the store kept: ordered
// says, after the run, whether the store has an order of that user (every
// request here has a user of its own). One found took effect at some
// moment after its call (its return stays open); one not found never did,
// and is left out. An order that cannot be looked up stays unknown. Without
// this, a few hundred unknown writes can each explain any gap, and the
// search tries their every subset.
func (h *History) Resolve(ordered func(user string) (bool, error)) (took, never int) {
	ops := h.snapshot()
	kept := ops[:0]
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Kind != Buy || out.Outcome != Maybe {
			kept = append(kept, op)
			continue
		}
		found, err := ordered(in.User)
		switch {
		case err != nil:
			kept = append(kept, op)
		case found:
			out.Outcome = Done
			op.Output = out
			kept = append(kept, op)
			took++
		default:
			never++
		}
	}
	h.mu.Lock()
	h.ops = kept
	h.maybe -= took + never
	h.writes -= never
	h.dropped += never
	h.mu.Unlock()
	return took, never
}
