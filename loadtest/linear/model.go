// Package linear records what the load and chaos runners' shoppers saw, a
// client-side history the way etcd's robustness tests record theirs, and
// has porcupine (github.com/anishathalye/porcupine) check it for
// linearizability: a checker nobody on this project wrote.
//
// A history is partitioned per SKU and per seat. The stock of one SKU is a
// counter that sells while stock remains and refuses after; one seat is a
// register taken once. A request whose outcome the shopper could not know
// (no answer, a 5xx that may have committed) may take effect at any time
// after its call, or never: its return is at infinity.
package linear

import (
	"fmt"
	"hash/maphash"

	"github.com/anishathalye/porcupine"
)

// Kind is what one operation of a history does.
type Kind uint8

// Kinds.
const (
	// Buy is an order of Qty units of one SKU.
	Buy Kind = iota
	// StockRead is the stock of one SKU as a product listing showed it.
	StockRead
	// Grab is a seat grab by User.
	Grab
	// SeatRead is one seat's holder as a seat map showed it.
	SeatRead
)

// Input is an operation's call. Every operation of a partition carries the
// partition's Initial stock, so one model serves every SKU.
type Input struct {
	Kind    Kind
	Key     string // the partition: "sku HOT-1" or "seat gala/A1"
	Qty     int64
	User    string
	Initial int64
}

// Outcome is what the shopper learnt of a write.
type Outcome uint8

// Outcomes.
const (
	// Done: the sale or booking was confirmed (201).
	Done Outcome = iota
	// Refused: sold out, or the seat was taken (409).
	Refused
	// Maybe: no answer, or one that does not say whether it took effect.
	Maybe
	// Contradicted: the answers to an order and its resends break the
	// store's promise on their own (sold twice under one Idempotency-Key,
	// or replayed when no request of it could have made it); Output.Why
	// says which. No state explains it.
	Contradicted
)

// NotSaid is Output.Left when the answer did not say the stock left.
const NotSaid = -1

// Output is an operation's return.
type Output struct {
	Outcome Outcome
	// Left is the stock after a Done Buy (NotSaid when the answer did not
	// carry it) and the stock a StockRead saw.
	Left int64
	// Holder is who a SeatRead saw holding the seat; "" is free.
	Holder string
	// Why says how a Contradicted write's answers break the promise.
	Why string
}

// state is one partition's: the stock left of a SKU, or the holder of a
// seat. fresh is the state before a partition's first step, which takes
// its initial stock from the input.
type state struct {
	fresh  bool
	seat   bool
	stock  int64
	holder string
	// pending counts the orders of unknown outcome already placed, by
	// their units (pending[q-1] orders of q units): each may take all its
	// units at any later moment, or none, never some. An answer or read
	// later says which of them did by then.
	pending [maxPendingQty]int32
}

// maxPendingQty is the most units of an order whose unknown outcome waits
// in the state's pending: the API's largest order. A larger one decides
// where it is placed, the slower way (next).
const maxPendingQty = 10

var seed = maphash.MakeSeed()

// Model is the sequential specification every partition is checked
// against. It is nondeterministic in one place: a write whose outcome the
// shopper could not know took effect where it is placed, or never, and both
// states go on; an answer or a read later keeps the ones it can explain.
// (Taken as having its effect wherever placed, and placed at the end when
// it never had one, the search would try every subset of the unknown
// writes before a read that needs them not to have happened.)
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partition,
		Init:      func() []any { return []any{state{fresh: true}} },
		Step: func(s, in, out any) []any {
			return next(s.(state), in.(Input), out.(Output))
		},
		Hash: func(s any) uint64 {
			return maphash.Comparable(seed, s.(state))
		},
		DescribeOperation: describe,
		DescribeState: func(s any) string {
			st := s.(state)
			switch {
			case st.fresh:
				return "start"
			case st.seat && st.holder != "":
				return "held by " + st.holder
			case st.seat:
				return "free"
			}
			if n := pendingUnits(st); n > 0 {
				return fmt.Sprintf("%d left, %d units of unknown orders pending", st.stock, n)
			}
			return fmt.Sprintf("%d left", st.stock)
		},
	}
	return nm.ToModel()
}

// next is every state s can be in after the operation; none when the
// operation cannot happen in s.
func next(s state, in Input, out Output) []any {
	if s.fresh {
		s = state{stock: in.Initial, seat: in.Kind == Grab || in.Kind == SeatRead}
	}
	if in.Kind == Buy || in.Kind == StockRead {
		return nextStock(s, in, out)
	}
	ok, after := step(s, in, out)
	switch {
	case out.Outcome == Maybe && in.Kind == Grab && ok && after != s:
		return []any{s, after} // it took the seat here, or never
	case ok:
		return []any{after}
	}
	return nil
}

// nextStock steps the counter. An order of unknown outcome joins the
// pending orders rather than choosing now; every later operation first
// lets some of them take effect whole (just before it), for every choice
// it can explain. A sale that says the stock it left, and a read, pin how
// many units went, so few choices survive.
func nextStock(s state, in Input, out Output) []any {
	if in.Kind == Buy && out.Outcome == Maybe {
		if in.Qty < 1 || in.Qty > maxPendingQty {
			_, after := step(s, in, out)
			return []any{s, after} // it took effect here, or never
		}
		s.pending[in.Qty-1]++
		return []any{s}
	}
	var outs []any
	for _, before := range released(s) {
		if ok, after := step(before, in, out); ok {
			outs = append(outs, after)
		}
	}
	return outs
}

// released is every state s can be in once any of its pending orders, each
// whole, have taken effect: s itself among them.
func released(s state) []state {
	outs := []state{s}
	for q := int64(maxPendingQty); q >= 1; q-- {
		n := len(outs)
		for _, o := range outs[:n] {
			for j := int32(1); j <= o.pending[q-1] && int64(j)*q <= o.stock; j++ {
				t := o
				t.stock -= int64(j) * q
				t.pending[q-1] -= j
				outs = append(outs, t)
			}
		}
	}
	return outs
}

// pendingUnits is how many units the pending orders of s would take.
func pendingUnits(s state) int64 {
	var n int64
	for i, c := range s.pending {
		n += int64(i+1) * int64(c)
	}
	return n
}

// step is the specification: a counter that sells while stock remains, a
// seat taken once, and reads that see what is there.
func step(s state, in Input, out Output) (bool, state) {
	if s.fresh {
		s = state{stock: in.Initial, seat: in.Kind == Grab || in.Kind == SeatRead}
	}
	if out.Outcome == Contradicted {
		return false, s
	}
	switch in.Kind {
	case Buy:
		enough := s.stock >= in.Qty
		switch out.Outcome {
		case Done:
			if !enough || (out.Left != NotSaid && out.Left != s.stock-in.Qty) {
				return false, s
			}
			s.stock -= in.Qty
		case Refused:
			return !enough, s
		default: // Maybe: linearized, it took effect if it could
			if enough {
				s.stock -= in.Qty
			}
		}
		return true, s
	case StockRead:
		return out.Left == s.stock, s
	case Grab:
		free := s.holder == ""
		switch out.Outcome {
		case Done:
			if !free {
				return false, s
			}
			s.holder = in.User
		case Refused:
			return !free, s
		default:
			if free {
				s.holder = in.User
			}
		}
		return true, s
	case SeatRead:
		return out.Holder == s.holder, s
	}
	return false, s
}

func describe(in, out any) string {
	i, o := in.(Input), out.(Output)
	switch i.Kind {
	case Buy:
		switch o.Outcome {
		case Done:
			if o.Left == NotSaid {
				return fmt.Sprintf("buy(%d) → sold", i.Qty)
			}
			return fmt.Sprintf("buy(%d) → sold, %d left", i.Qty, o.Left)
		case Refused:
			return fmt.Sprintf("buy(%d) → sold out", i.Qty)
		case Contradicted:
			return fmt.Sprintf("buy(%d) → %s", i.Qty, o.Why)
		}
		return fmt.Sprintf("buy(%d) → ?", i.Qty)
	case StockRead:
		return fmt.Sprintf("read → %d", o.Left)
	case Grab:
		switch o.Outcome {
		case Done:
			return "grab(" + i.User + ") → booked"
		case Refused:
			return "grab(" + i.User + ") → taken"
		case Contradicted:
			return "grab(" + i.User + ") → " + o.Why
		}
		return "grab(" + i.User + ") → ?"
	case SeatRead:
		if o.Holder == "" {
			return "read → free"
		}
		return "read → " + o.Holder
	}
	return "?"
}

// partition splits a history per SKU and per seat, keeping each
// partition's operations in the history's order.
func partition(h []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range h {
		k := op.Input.(Input).Key
		i, ok := index[k]
		if !ok {
			i = len(parts)
			index[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}
