package linear

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestResendsAndWholeOrders are the hand-made histories a review of the
// checker found misjudged: a resend taken for a second purchase, a resend
// that sold a second time going unseen, and a 2-unit order of unknown
// outcome that half happened.
func TestResendsAndWholeOrders(t *testing.T) {
	u7 := func(qty int64) Request { return Request{SKU: "HOT", Qty: qty, User: "u7", Key: "k7"} }
	unknown := func(call int) write { return write{u7(1), at{call, call + 1}, 0, ``} }
	tests := []struct {
		name    string
		initial int64
		writes  []write
		reads   []read
		orders  int // the store's orders of u7, as the lookup after the run finds them; -1: the lookup fails
		want    string
	}{
		{name: "a resend without an answer after its order's 201 is the same order", initial: 1,
			writes: []write{{u7(1), at{0, 10}, 201, `{"stock_left":0}`}, unknown(5)},
			reads:  []read{{when: at{20, 21}, stock: map[string]int64{"HOT": 0}}},
			orders: 1, want: Linearizable},
		{name: "a resend without an answer that sold a second time", initial: 2,
			writes: []write{{u7(1), at{0, 10}, 201, `{"stock_left":1}`}, unknown(20)},
			reads:  []read{{when: at{30, 31}, stock: map[string]int64{"HOT": 0}}},
			orders: 2, want: NotLinearizable},
		{name: "a resend without an answer that sold a second time, the lookup failing", initial: 2,
			writes: []write{{u7(1), at{0, 10}, 201, `{"stock_left":1}`}, unknown(20)},
			reads:  []read{{when: at{30, 31}, stock: map[string]int64{"HOT": 0}}},
			orders: -1, want: NotLinearizable},
		{name: "a resend answered as a new sale", initial: 2,
			writes: []write{{u7(1), at{0, 10}, 201, `{"stock_left":1}`}, {u7(1), at{20, 30}, 201, `{"stock_left":0}`}},
			orders: 2, want: NotLinearizable},
		{name: "half of a 2-unit order of unknown outcome", initial: 1,
			writes: []write{{u7(2), at{0, 1}, 0, ``}},
			reads:  []read{{when: at{10, 11}, stock: map[string]int64{"HOT": 0}}},
			orders: -1, want: NotLinearizable},
		{name: "a 2-unit order of unknown outcome, whole", initial: 3,
			writes: []write{{u7(2), at{0, 1}, 0, ``}},
			reads:  []read{{when: at{10, 11}, stock: map[string]int64{"HOT": 1}}},
			orders: -1, want: Linearizable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(map[string]int64{"HOT": tt.initial})
			h.replay(t, tt.writes, tt.reads)
			h.Resolve(func(string) (int, error) {
				if tt.orders < 0 {
					return 0, errLookup
				}
				return tt.orders, nil
			})
			if v := h.Check(time.Minute); v.Result != tt.want {
				t.Fatalf("got %s, want %s", v.Result, tt.want)
			}
		})
	}
}

// errLookup is a lookup of a user's orders that failed: the orders stay
// as the shoppers saw them.
var errLookup = errors.New("the store could not be asked")

// TestReadFileChecksAlike: a history read back from its file is judged as
// it was, with the same figures: what a recheck of a kept run relies on.
func TestReadFileChecksAlike(t *testing.T) {
	u := func(user string, qty int64) Request {
		return Request{SKU: "HOT", Qty: qty, User: user, Key: "k" + user}
	}
	for _, tt := range []struct {
		name   string
		writes []write
	}{
		{"a whole 2-unit order and a refusal", []write{{u("a", 2), at{0, 10}, 201, `{"stock_left":1}`}, {u("b", 2), at{20, 30}, 409, `{"error":"sold_out"}`}}},
		{"a resend sold again", []write{{u("a", 1), at{0, 10}, 201, `{"stock_left":2}`}, {u("a", 1), at{20, 30}, 201, `{"stock_left":1}`}}},
		{"an order of unknown outcome", []write{{u("a", 3), at{0, 1}, 0, ``}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := New(map[string]int64{"HOT": 3})
			h.replay(t, tt.writes, []read{{when: at{40, 41}, stock: map[string]int64{"HOT": 1}}})
			path := filepath.Join(t.TempDir(), "h.jsonl")
			if err := h.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			back, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			was, is := h.Check(time.Minute), back.Check(time.Minute)
			// Answers left out are not operations, and resends are folded
			// into their orders: the file has neither.
			is.Dropped, is.Resends = was.Dropped, was.Resends
			if was.Result != is.Result || was.Figures != is.Figures {
				t.Fatalf("read back: %s %+v, was %s %+v", is.Result, is.Figures, was.Result, was.Figures)
			}
		})
	}
}
