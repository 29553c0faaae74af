package linear

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// The property: on random histories of one SKU (orders of 1 to 3 units,
// sales, refusals, reads, sends without an answer, resends under one
// Idempotency-Key, the lookup after the run), the project's model and
// porcupine give the verdict a brute-force checker written here from the
// shop's promise gives. The checker knows nothing of the model: no
// pending orders, no reduction, no porcupine; it tries every instant order
// of every choice of which send made each order.

// sent is one send of an order, as a test history has it.
type sent struct {
	call, ret int   // ret is forever when it got no answer
	code      int   // 201, 409, or 0 for no answer
	replay    bool  // a 201 that replayed the order
	left      int64 // a new sale's stock_left; NotSaid when the answer did not say
}

// order is one order and its sends; lookup is how many orders the store
// has of its user after the run, -1 when the lookup fails.
type order struct {
	qty    int64
	sends  []sent
	lookup int
}

// seen is a read of the stock.
type seen struct {
	call, ret int
	stock     int64
}

type randomHistory struct {
	initial int64
	orders  []order
	reads   []seen
}

const forever = 1 << 30

// bruteForce is the verdict of the shop's promise, by search: every order
// took effect once or never, whole, at one instant after the call of the
// send that made it (its one new sale, else any send not answered) and
// before any 201 of it came back; a refusal and a read each saw the stock
// at one instant of their own; the instants in order tell a counter's
// story. An order with two new sales, or that the store has twice, was
// sold twice.
func bruteForce(h randomHistory) bool {
	type event struct {
		lo, hi int
		qty    int64 // > 0: a sale
		left   int64 // a sale's stock after, or NotSaid
		below  int64 // > 0: a refusal, the stock below it
		is     int64 // a read's stock
		read   bool
	}
	var fixed []event
	type choice struct {
		options [][]event // one event list per way the order can have gone
	}
	var choices []choice
	for _, o := range h.orders {
		back, fresh, unknown := forever, []sent{}, []sent{}
		for _, s := range o.sends {
			switch {
			case s.code == 409:
				fixed = append(fixed, event{lo: s.call, hi: s.ret, below: o.qty})
			case s.code == 201:
				back = min(back, s.ret)
				if !s.replay {
					fresh = append(fresh, s)
				}
			default:
				unknown = append(unknown, s)
			}
		}
		looked := o.lookup >= 0 && len(unknown) > 0
		if len(fresh) > 1 || looked && o.lookup > 1 {
			return false
		}
		var c choice
		if len(fresh) == 1 {
			c.options = append(c.options, []event{{lo: fresh[0].call, hi: min(fresh[0].ret, back), qty: o.qty, left: fresh[0].left}})
		} else {
			never := back == forever && looked && o.lookup == 0 // the store does not have it
			if !never {
				for _, u := range unknown {
					c.options = append(c.options, []event{{lo: u.call, hi: back, qty: o.qty, left: NotSaid}})
				}
			}
			if back == forever && !(looked && o.lookup == 1) {
				c.options = append(c.options, nil) // it never took effect
			}
		}
		if len(c.options) == 0 {
			return false
		}
		choices = append(choices, c)
	}
	for _, r := range h.reads {
		fixed = append(fixed, event{lo: r.call, hi: r.ret, is: r.stock, read: true})
	}
	var try func(i int, evs []event) bool
	try = func(i int, evs []event) bool {
		if i == len(choices) {
			return orderable(evs, h.initial, func(e event, stock int64) (int64, bool) {
				switch {
				case e.qty > 0:
					if stock < e.qty || e.left != NotSaid && e.left != stock-e.qty {
						return stock, false
					}
					return stock - e.qty, true
				case e.read:
					return stock, stock == e.is
				}
				return stock, stock < e.below
			}, func(e event) (int, int) { return e.lo, e.hi })
		}
		for _, opt := range choices[i].options {
			if try(i+1, append(append([]event(nil), evs...), opt...)) {
				return true
			}
		}
		return false
	}
	return try(0, fixed)
}

// orderable reports whether the events can be put in an order whose
// instants fit their intervals (lo ≤ instant ≤ hi, one after another) and
// that step accepts from initial on.
func orderable[E any](evs []E, initial int64, step func(E, int64) (int64, bool), span func(E) (int, int)) bool {
	n := len(evs)
	seenStates := map[[3]int64]bool{}
	var dfs func(placed uint32, stock int64, at int) bool
	dfs = func(placed uint32, stock int64, at int) bool {
		if placed == 1<<n-1 {
			return true
		}
		k := [3]int64{int64(placed), stock, int64(at)}
		if seenStates[k] {
			return false
		}
		seenStates[k] = true
		for i, e := range evs {
			lo, hi := span(e)
			if placed&(1<<i) != 0 || hi < at || lo > hi {
				continue
			}
			next, ok := step(e, stock)
			if ok && dfs(placed|1<<i, next, max(at, lo)) {
				return true
			}
		}
		return false
	}
	return dfs(0, initial, 0)
}

// generate is a random history: a store selling at random instants, told
// with answers lost at random, then now and then one answer or one read
// made wrong, or an order sold twice or in part.
func generate(rng *rand.Rand) randomHistory {
	h := randomHistory{initial: rng.Int64N(5)}
	stock := h.initial
	type effect struct {
		at  int
		o   int
		qty int64
	}
	n := 1 + rng.IntN(4)
	var effects []effect
	for i := range n {
		o := order{qty: 1 + rng.Int64N(3), lookup: -1}
		call := 2 * rng.IntN(15)
		ret := call + 2 + 2*rng.IntN(5)
		o.sends = []sent{{call: call, ret: ret}}
		h.orders = append(h.orders, o)
		effects = append(effects, effect{at: call + 1 + 2*rng.IntN((ret-call)/2), o: i, qty: o.qty})
	}
	// The store: each order at its instant, in instant order.
	for i := range effects {
		for j := i + 1; j < len(effects); j++ {
			if effects[j].at < effects[i].at {
				effects[i], effects[j] = effects[j], effects[i]
			}
		}
	}
	type point struct {
		at    int
		stock int64
	}
	timeline := []point{{0, stock}}
	for _, e := range effects {
		o := &h.orders[e.o]
		took := e.qty
		if rng.IntN(12) == 0 {
			took = rng.Int64N(e.qty) // a store that sold part of the order
		}
		if stock >= e.qty {
			stock -= took
			o.sends[0].code, o.sends[0].left = 201, stock
			o.lookup = 1
		} else {
			o.sends[0].code = 409
			o.lookup = 0
		}
		timeline = append(timeline, point{e.at, stock})
		if rng.IntN(3) == 0 { // a resend, after the order was decided
			call := e.at + 1 + 2*rng.IntN(4)
			call -= call % 2
			call = max(call, o.sends[0].call)
			r := sent{call: call, ret: call + 2 + 2*rng.IntN(3), code: o.sends[0].code, replay: true, left: NotSaid}
			if r.code == 409 {
				r.replay = false
			}
			if r.code == 201 && rng.IntN(6) == 0 && stock >= e.qty { // a store that sold it again
				stock -= e.qty
				r.replay, r.left = false, stock
				o.lookup = 2
				timeline = append(timeline, point{call + 1, stock})
			}
			o.sends = append(o.sends, r)
		}
	}
	stockAt := func(t int) int64 {
		s := h.initial
		for _, p := range timeline {
			if p.at <= t {
				s = p.stock
			}
		}
		return s
	}
	for range rng.IntN(4) {
		at := 1 + 2*rng.IntN(20)
		h.reads = append(h.reads, seen{call: max(0, at-1-2*rng.IntN(2)), ret: at + 1 + 2*rng.IntN(2), stock: stockAt(at)})
	}
	// Answers lost, lookups failing.
	for i := range h.orders {
		o := &h.orders[i]
		for j := range o.sends {
			if rng.IntN(4) == 0 {
				o.sends[j] = sent{call: o.sends[j].call, ret: forever, left: NotSaid}
			}
		}
		if rng.IntN(3) == 0 {
			o.lookup = -1
		}
	}
	// Now and then one answer or one read made wrong.
	switch rng.IntN(6) {
	case 0:
		if len(h.reads) > 0 {
			h.reads[0].stock += int64(1 - 2*rng.IntN(2))
			h.reads[0].stock = max(h.reads[0].stock, 0)
		}
	case 1:
		if s := &h.orders[0].sends[0]; s.code == 201 && s.left != NotSaid {
			s.left++
		}
	case 2:
		if s := &h.orders[0].sends[0]; s.code == 409 {
			s.code, s.left = 201, NotSaid
		}
	}
	return h
}

// record replays a random history into a History, as the runners record
// theirs (times in milliseconds from its start), and resolves it with the
// lookups.
func record(rh randomHistory) *History {
	h := New(map[string]int64{"S": rh.initial})
	ms := func(n int) time.Time { return h.start.Add(time.Duration(n) * time.Millisecond) }
	lookups := map[string]int{}
	for i, o := range rh.orders {
		user := fmt.Sprintf("u%d", i)
		lookups[user] = o.lookup
		r := Request{SKU: "S", Qty: o.qty, User: user, Key: "k" + user}
		for _, s := range o.sends {
			header, body, latency := http.Header{}, "", time.Duration(s.ret-s.call)*time.Millisecond
			switch {
			case s.code == 201 && s.replay:
				header.Set("Idempotent-Replay", "true")
				body = `{}`
			case s.code == 201 && s.left == NotSaid:
				body = `{}`
			case s.code == 201:
				body = fmt.Sprintf(`{"stock_left":%d}`, s.left)
			case s.code == 409:
				body = `{"error":"sold_out"}`
			default:
				latency = time.Millisecond
			}
			h.Answer(r, ms(s.call), latency, uint16(s.code), header, []byte(body))
		}
	}
	for _, r := range rh.reads {
		h.Stock(ms(r.call), ms(r.ret), map[string]int64{"S": r.stock})
	}
	h.Resolve(func(user string) (int, error) {
		if lookups[user] < 0 {
			return 0, errLookup
		}
		return lookups[user], nil
	})
	return h
}

// TestModelAgreesWithBruteForce: the property, on 3,000 random histories;
// both verdicts must come up often, or the histories test nothing.
func TestModelAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 2026))
	const histories = 3000
	verdicts := map[string]int{}
	for i := range histories {
		rh := generate(rng)
		want := NotLinearizable
		if bruteForce(rh) {
			want = Linearizable
		}
		v := record(rh).Check(time.Minute)
		verdicts[want]++
		if v.Result != want {
			t.Fatalf("history %d: the model says %s, the brute force %s:\n%+v", i, v.Result, want, rh)
		}
	}
	for _, r := range []string{Linearizable, NotLinearizable} {
		if verdicts[r] < histories/10 {
			t.Errorf("only %d of %d histories %s: the generator does not test both ways", verdicts[r], histories, r)
		}
	}
	t.Logf("%v", verdicts)
}
