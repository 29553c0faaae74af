package linear

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/anishathalye/porcupine"
)

// groups splits the sends of writes into orders (or seat grabs): the sends
// that share a user and an Idempotency-Key, in the order of their first
// send. A send without a key is a group of its own.
func groups(writes []attempt) [][]attempt {
	index := map[[2]string]int{}
	var out [][]attempt
	for _, a := range writes {
		k := [2]string{a.in.Key + "\x00" + a.in.User, a.idem}
		i, ok := index[k]
		if !ok || a.idem == "" {
			i = len(out)
			index[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], a)
	}
	return out
}

// answered reports whether any send of the group was answered as having
// taken effect or not (a 201 or a refusal).
func answered(g []attempt) bool {
	return slices.ContainsFunc(g, func(a attempt) bool { return a.ret != never })
}

// Figures are the sizes of a history as porcupine is given it.
type Figures struct {
	// Ops counts the operations; Writes the orders and seat grabs among
	// them, Maybe the writes whose outcome the shopper could not know,
	// Reads the stock and seat reads; Dropped the answers left out because
	// they say nothing took effect, or because the store kept no order of
	// a request never answered.
	Ops     int `json:"ops"`
	Writes  int `json:"writes"`
	Maybe   int `json:"unknown_outcome"`
	Reads   int `json:"reads"`
	Dropped int `json:"left_out"`
	// Resends counts the sends folded into their order's operation (the
	// same user and Idempotency-Key); MultiUnit the orders of more than
	// one unit; Contradicted the orders and grabs whose own answers break
	// the store's promise (sold twice under one key).
	Resends      int `json:"resends"`
	MultiUnit    int `json:"multi_unit_orders"`
	Contradicted int `json:"contradicted,omitempty"`
}

// ops is the history as porcupine is given it, and its figures. A group of
// sends is one write: a refusal among them is a read of the stock (or the
// seat) of its own, since it changes nothing; the rest take effect once or
// never, at one instant after the call of the send that made it (the one
// answered 201 as a new sale, else any send not answered) and before the
// first 201 (new or replayed) came back.
func (h *History) ops() ([]porcupine.Operation, Figures) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.reads)
	f := Figures{Dropped: h.dropped}
	for _, op := range h.reads {
		in := op.Input.(Input)
		if in.Kind == Buy || in.Kind == Grab {
			f.Writes++
			switch o := op.Output.(Output); {
			case o.Outcome == Contradicted:
				f.Contradicted++
			case op.Return == never && o.Outcome == Maybe:
				f.Maybe++
			}
			if in.Kind == Buy && in.Qty > 1 && op.Output.(Output).Outcome != Refused {
				f.MultiUnit++
			}
		}
	}
	for _, g := range groups(h.writes) {
		var rest []attempt
		for _, a := range g {
			if a.out.Outcome == Refused {
				out = append(out, porcupine.Operation{Input: a.in, Output: a.out, Call: a.call, Return: a.ret})
				f.Writes++
				continue
			}
			rest = append(rest, a)
		}
		f.Resends += len(g) - 1
		if len(rest) == 0 {
			continue
		}
		found, looked := h.orders[rest[0].in.User]
		op, ok := merge(rest, found, looked && rest[0].in.Kind == Buy)
		if !ok {
			f.Dropped++
			continue
		}
		out = append(out, op)
		f.Writes++
		switch o := op.Output.(Output); {
		case o.Outcome == Contradicted:
			f.Contradicted++
		case op.Return == never && o.Outcome == Maybe:
			f.Maybe++
		}
		if g[0].in.Kind == Buy && g[0].in.Qty > 1 {
			f.MultiUnit++
		}
	}
	f.Ops = len(out)
	f.Reads = f.Ops - f.Writes
	return out, f
}

// merge makes one write of the sends of one order or grab that were not
// refused; found is how many orders the store has of its user, when
// looked. It is false for an order none of whose sends was answered and
// that the store does not have: it never happened.
func merge(g []attempt, found int, looked bool) (porcupine.Operation, bool) {
	var fresh []attempt
	made := int64(never) // the earliest call of a send that may have made it
	back := int64(never) // the first 201 back, new or replayed
	for _, a := range g {
		switch {
		case a.out.Outcome == Done && !a.replay:
			fresh = append(fresh, a)
			back = min(back, a.ret)
		case a.out.Outcome == Done:
			back = min(back, a.ret)
		default: // not answered: it may have made it
			made = min(made, a.call)
		}
	}
	out := Output{Outcome: Maybe, Left: NotSaid}
	op := porcupine.Operation{Input: g[0].in, Call: made, Return: back}
	contradicted := func(why string) (porcupine.Operation, bool) {
		op.Output = Output{Outcome: Contradicted, Left: NotSaid, Why: why}
		op.Call = slices.MinFunc(g, func(a, b attempt) int { return compare(a.call, b.call) }).call
		op.Return = max(op.Call, back)
		return op, true
	}
	switch {
	case len(fresh) > 1 || looked && found > 1:
		return contradicted("sold twice under one Idempotency-Key")
	case len(fresh) == 1 && fresh[0].call > back:
		return contradicted("replayed before the send that sold it was sent")
	case len(fresh) == 1:
		op.Call, out = fresh[0].call, fresh[0].out
	case back != never && (made == never || made > back):
		return contradicted("replayed, but no send of it could have made it")
	case back != never:
		out.Outcome = Done
	case looked && found == 0:
		return op, false
	case looked:
		out.Outcome = Done // the store has it: it took effect at some moment after its call
	}
	op.Output = out
	return op, true
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (h *History) snapshot() []porcupine.Operation {
	ops, _ := h.ops()
	return ops
}

// Size is how many operations the history holds, how many of them are
// writes, how many writes have an unknown outcome, and how many answers
// were left out.
func (h *History) Size() (ops, writes, maybe, dropped int) {
	_, f := h.ops()
	return f.Ops, f.Writes, f.Maybe, f.Dropped
}

// ReadFile reads a history WriteFile wrote: the operations porcupine was
// given, to check again.
func ReadFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := New(nil)
	dec := json.NewDecoder(f)
	for {
		var j jsonOp
		if err := dec.Decode(&j); errors.Is(err, io.EOF) {
			return h, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		in := Input{Key: j.Key, User: j.User, Qty: j.Qty, Initial: j.Initial, Kind: Kind(slices.Index(kindNames[:], j.Op))}
		out := Output{Left: NotSaid, Holder: j.Holder, Why: j.Why}
		if j.Left != nil {
			out.Left = *j.Left
		}
		if j.Outcome != "" {
			out.Outcome = Outcome(slices.Index(outcomeNames[:], j.Outcome))
		}
		if int(in.Kind) < 0 || in.Kind > SeatRead || int(out.Outcome) < 0 || out.Outcome > Contradicted {
			return nil, fmt.Errorf("%s: an operation %q of outcome %q", path, j.Op, j.Outcome)
		}
		ret := int64(never)
		if j.Return != nil {
			ret = *j.Return
		}
		h.reads = append(h.reads, porcupine.Operation{Input: in, Output: out, Call: j.Call, Return: ret})
	}
}
