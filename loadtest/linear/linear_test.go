package linear

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// at is a moment of a test history, in milliseconds after its start.
type at struct{ call, ret int }

type write struct {
	r    Request
	when at
	code uint16
	body string
}

type read struct {
	when  at
	stock map[string]int64
	seats map[string]string
}

func (h *History) replay(t *testing.T, ws []write, rs []read) {
	t.Helper()
	ms := func(n int) time.Time { return h.start.Add(time.Duration(n) * time.Millisecond) }
	for _, w := range ws {
		h.Answer(w.r, ms(w.when.call), time.Duration(w.when.ret-w.when.call)*time.Millisecond, w.code, http.Header{}, []byte(w.body))
	}
	for _, r := range rs {
		if r.stock != nil {
			h.Stock(ms(r.when.call), ms(r.when.ret), r.stock)
		}
		if r.seats != nil {
			h.Seats(ms(r.when.call), ms(r.when.ret), "gala", r.seats)
		}
	}
}

func TestCheck(t *testing.T) {
	buy := func(user string) Request { return Request{SKU: "HOT", Qty: 1, User: user} }
	grab := func(user string) Request { return Request{Event: "gala", Seat: "A1", User: user} }
	tests := []struct {
		name    string
		writes  []write
		reads   []read
		want    string
		illegal []string
	}{
		{name: "two units sold in turn, then sold out",
			writes: []write{
				{buy("a"), at{0, 10}, 201, `{"stock_left":1}`},
				{buy("b"), at{5, 20}, 201, `{"stock_left":0}`},
				{buy("c"), at{21, 30}, 409, `{"error":"sold_out"}`},
			},
			reads: []read{{when: at{31, 32}, stock: map[string]int64{"HOT": 0}}},
			want:  Linearizable},
		{name: "three sold of two: oversold",
			writes: []write{
				{buy("a"), at{0, 10}, 201, `{}`},
				{buy("b"), at{0, 10}, 201, `{}`},
				{buy("c"), at{0, 10}, 201, `{}`},
			},
			want: NotLinearizable, illegal: []string{"sku HOT"}},
		{name: "two sales leave the same stock: a lost update",
			writes: []write{
				{buy("a"), at{0, 10}, 201, `{"stock_left":1}`},
				{buy("b"), at{0, 10}, 201, `{"stock_left":1}`},
			},
			want: NotLinearizable, illegal: []string{"sku HOT"}},
		{name: "a read after two sales still sees one unit: a lost update",
			writes: []write{
				{buy("a"), at{0, 10}, 201, `{}`},
				{buy("b"), at{0, 10}, 201, `{}`},
			},
			reads: []read{{when: at{11, 12}, stock: map[string]int64{"HOT": 1}}},
			want:  NotLinearizable, illegal: []string{"sku HOT"}},
		{name: "a sale without an answer may have taken the unit a later read misses",
			writes: []write{
				{buy("a"), at{0, 10}, 0, ``},
				{buy("b"), at{0, 10}, 503, `{"error":"store_unavailable"}`},
			},
			reads: []read{{when: at{11, 12}, stock: map[string]int64{"HOT": 1}}, {when: at{20, 21}, stock: map[string]int64{"HOT": 0}}},
			want:  Linearizable},
		{name: "a busy lock sold nothing, so a read that misses a unit is not linearizable",
			writes: []write{{buy("a"), at{0, 10}, 503, `{"error":"lock_busy"}`}},
			reads:  []read{{when: at{11, 12}, stock: map[string]int64{"HOT": 1}}},
			want:   NotLinearizable, illegal: []string{"sku HOT"}},
		{name: "sold out while a read after it still sees stock",
			writes: []write{{buy("a"), at{0, 10}, 409, `{"error":"sold_out"}`}},
			reads:  []read{{when: at{11, 12}, stock: map[string]int64{"HOT": 2}}},
			want:   NotLinearizable, illegal: []string{"sku HOT"}},
		{name: "one seat booked, the next told it is taken",
			writes: []write{
				{grab("a"), at{0, 10}, 201, `{}`},
				{grab("b"), at{5, 15}, 409, `{"error":"seat_taken"}`},
			},
			reads: []read{{when: at{16, 17}, seats: map[string]string{"A1": "a", "A2": ""}}},
			want:  Linearizable},
		{name: "one seat booked twice",
			writes: []write{
				{grab("a"), at{0, 10}, 201, `{}`},
				{grab("b"), at{0, 10}, 201, `{}`},
			},
			want: NotLinearizable, illegal: []string{"seat gala/A1"}},
		{name: "a seat map shows a holder whose grab was refused",
			writes: []write{
				{grab("a"), at{0, 10}, 201, `{}`},
				{grab("b"), at{11, 20}, 409, `{"error":"seat_taken"}`},
			},
			reads: []read{{when: at{21, 22}, seats: map[string]string{"A1": "b"}}},
			want:  NotLinearizable, illegal: []string{"seat gala/A1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(map[string]int64{"HOT": 2})
			h.replay(t, tt.writes, tt.reads)
			v := h.Check(time.Minute)
			if v.Result != tt.want || strings.Join(v.Illegal, ",") != strings.Join(tt.illegal, ",") {
				t.Fatalf("got %s %v, want %s %v", v.Result, v.Illegal, tt.want, tt.illegal)
			}
			if got := v.Linearizable(); got == nil || *got != (tt.want == Linearizable) {
				t.Fatalf("Linearizable() = %v for %s", got, v.Result)
			}
			if v.Result != NotLinearizable {
				return
			}
			path := filepath.Join(t.TempDir(), "histories", "x.html")
			if err := v.Visualize(path, time.Minute); err != nil {
				t.Fatal(err)
			}
			page, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(page), "<html") {
				t.Fatalf("picture at %s: %v, %d bytes", path, err, len(page))
			}
		})
	}
}

// TestTimeoutIsUnknown: a check that runs out of time never passes.
func TestTimeoutIsUnknown(t *testing.T) {
	h := New(map[string]int64{"HOT": 1})
	h.replay(t, []write{{Request{SKU: "HOT", Qty: 1, User: "a"}, at{0, 1}, 201, `{}`}}, nil)
	v := h.Check(time.Nanosecond)
	if v.Result != Unknown || v.Linearizable() != nil {
		t.Fatalf("got %s (%v), want unknown and no verdict", v.Result, v.Linearizable())
	}
}

// TestReplayAndRefusalsLeftOut: an answer that says nothing took effect,
// and a replay of an earlier order, are not operations of the history.
func TestReplayAndRefusalsLeftOut(t *testing.T) {
	h := New(map[string]int64{"HOT": 1})
	r := Request{SKU: "HOT", Qty: 1, User: "a"}
	h.Answer(r, time.Now(), time.Millisecond, 201, http.Header{"Idempotent-Replay": {"true"}}, []byte(`{}`))
	h.Answer(r, time.Now(), time.Millisecond, 429, http.Header{}, []byte(`{"error":"rate_limited"}`))
	h.Answer(r, time.Now(), time.Millisecond, 503, http.Header{}, []byte(`{"error":"overloaded"}`))
	h.Answer(r, time.Now(), time.Millisecond, 500, http.Header{}, []byte(`{"error":"internal"}`))
	ops, writes, maybe, dropped := h.Size()
	if ops != 1 || writes != 1 || maybe != 1 || dropped != 3 {
		t.Fatalf("ops %d writes %d maybe %d dropped %d, want 1 1 1 3", ops, writes, maybe, dropped)
	}
}

// TestReduceDropsOnlyContainedObservations: a refusal or read whose
// interval holds another asking the same of the state is left out; writes,
// and observations that ask something else, never are.
func TestReduceDropsOnlyContainedObservations(t *testing.T) {
	buy := Request{SKU: "HOT", Qty: 1, User: "a"}
	tests := []struct {
		name   string
		writes []write
		reads  []read
		want   int
	}{
		{"a refusal around a read of zero", []write{{buy, at{0, 30}, 409, `{"error":"sold_out"}`}},
			[]read{{when: at{10, 20}, stock: map[string]int64{"HOT": 0}}}, 1},
		{"a read of zero around a refusal", []write{{buy, at{10, 20}, 409, `{"error":"sold_out"}`}},
			[]read{{when: at{0, 30}, stock: map[string]int64{"HOT": 0}}}, 1},
		{"overlapping, neither inside the other", []write{{buy, at{0, 20}, 409, `{"error":"sold_out"}`}},
			[]read{{when: at{10, 30}, stock: map[string]int64{"HOT": 0}}}, 0},
		{"a read of one around a read of zero", nil,
			[]read{{when: at{0, 30}, stock: map[string]int64{"HOT": 1}}, {when: at{10, 20}, stock: map[string]int64{"HOT": 0}}}, 0},
		{"a sale around a sale", []write{{buy, at{0, 30}, 201, `{}`}, {buy, at{10, 20}, 201, `{}`}}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(map[string]int64{"HOT": 2})
			h.replay(t, tt.writes, tt.reads)
			if _, n := reduce(h.snapshot()); n != tt.want {
				t.Fatalf("dropped %d, want %d", n, tt.want)
			}
		})
	}
}

// TestResolve: an order without an answer that the store kept took
// effect, one it did not keep never did, and one that cannot be looked up
// stays unknown.
func TestResolve(t *testing.T) {
	h := New(map[string]int64{"HOT": 1})
	for _, u := range []string{"kept", "not-kept", "unreadable"} {
		h.Answer(Request{SKU: "HOT", Qty: 1, User: u}, h.start, time.Millisecond, 0, nil, nil)
	}
	took, never := h.Resolve(func(user string) (int, error) {
		if user == "unreadable" {
			return 0, os.ErrDeadlineExceeded
		}
		if user == "kept" {
			return 1, nil
		}
		return 0, nil
	})
	ops, writes, maybe, _ := h.Size()
	if took != 1 || never != 1 || ops != 2 || writes != 2 || maybe != 1 {
		t.Fatalf("took %d never %d; ops %d writes %d unknown %d, want 1 1; 2 2 1", took, never, ops, writes, maybe)
	}
	// The kept order took the only unit, at some moment: another sale of
	// it is not linearizable, whenever it came.
	h.Answer(Request{SKU: "HOT", Qty: 1, User: "b"}, h.start.Add(time.Second), time.Second, 201, nil, []byte(`{"stock_left":0}`))
	if v := h.Check(time.Minute); v.Result != NotLinearizable {
		t.Fatalf("got %s, want %s", v.Result, NotLinearizable)
	}
}
