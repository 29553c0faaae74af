package linear

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Results of a check.
const (
	Linearizable    = "linearizable"
	NotLinearizable = "not linearizable"
	// Unknown: the check ran out of time before it could decide. Never a
	// pass.
	Unknown = "unknown"
)

// Verdict is porcupine's judgement of one history.
type Verdict struct {
	// Result is Linearizable, NotLinearizable or Unknown.
	Result string `json:"result"`
	// Figures are the history's sizes.
	Figures
	// Partitions is how many SKUs and seats the history has; Unchecked
	// how many the time ran out before.
	Partitions int `json:"partitions"`
	// Redundant counts the reads and refusals left out of the check
	// because another asking the same lies within their interval.
	Redundant int `json:"redundant"`
	Unchecked int `json:"unchecked,omitempty"`
	// Illegal names the partitions that are not linearizable ("sku HOT-1",
	// "seat gala/A1").
	Illegal []string `json:"not_linearizable,omitempty"`
	// Took is how long the check ran.
	Took    time.Duration `json:"took_ns"`
	Timeout time.Duration `json:"timeout_ns"`

	illegal []porcupine.Operation
}

// Linearizable is true or false when the check decided, nil when it did not.
func (v Verdict) Linearizable() *bool {
	if v.Result == Unknown || v.Result == "" {
		return nil
	}
	ok := v.Result == Linearizable
	return &ok
}

// Mark is the verdict as a table shows it: "yes", "NO", "unknown", or ""
// when no check ran (a nil verdict).
func (v *Verdict) Mark() string {
	if v == nil {
		return ""
	}
	switch ok := v.Linearizable(); {
	case ok == nil:
		return "unknown"
	case *ok:
		return "yes"
	}
	return "NO"
}

// Check has porcupine check the history, one partition at a time, within
// timeout in all. A partition found not linearizable decides the history
// whatever the time left; a timeout before every partition was decided
// otherwise makes the result Unknown.
func (h *History) Check(timeout time.Duration) Verdict {
	begin := time.Now()
	ops, f := h.ops()
	v := Verdict{Figures: f, Timeout: timeout}
	m := Model()
	parts := m.Partition(ops)
	v.Partitions = len(parts)
	m.Partition = nil
	deadline := begin.Add(timeout)
	for _, p := range parts {
		p, n := reduce(p)
		v.Redundant += n
		left := time.Until(deadline)
		if left <= 0 {
			v.Unchecked++
			continue
		}
		switch porcupine.CheckOperationsTimeout(m, p, left) {
		case porcupine.Illegal:
			v.Illegal = append(v.Illegal, p[0].Input.(Input).Key)
			v.illegal = append(v.illegal, p...)
		case porcupine.Unknown:
			v.Unchecked++
		}
	}
	slices.Sort(v.Illegal)
	switch {
	case len(v.Illegal) > 0:
		v.Result = NotLinearizable
	case v.Unchecked > 0:
		v.Result = Unknown
	default:
		v.Result = Linearizable
	}
	v.Took = time.Since(begin)
	return v
}

// maxPictured bounds the partitions one picture shows: past a few, the
// page only gets slower to open, not clearer.
const maxPictured = 8

// Visualize writes porcupine's picture of the partitions v found not
// linearizable to path, an HTML page: each partition's longest
// linearizable prefix, and the operations that no order can place. It
// checks those partitions again, within timeout, to draw them.
func (v Verdict) Visualize(path string, timeout time.Duration) error {
	if len(v.illegal) == 0 {
		return fmt.Errorf("nothing to picture: the history is %s", v.Result)
	}
	ops := v.illegal
	if len(v.Illegal) > maxPictured {
		keep := map[string]bool{}
		for _, k := range v.Illegal[:maxPictured] {
			keep[k] = true
		}
		ops = slices.DeleteFunc(slices.Clone(ops), func(op porcupine.Operation) bool { return !keep[op.Input.(Input).Key] })
	}
	ops = lanes(ops)
	m := Model()
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	if res == porcupine.Ok {
		return fmt.Errorf("the partitions found not linearizable now check as linearizable")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return porcupine.VisualizePath(m, info, path)
}

// lanes gives every operation a client lane for the picture: vegeta's
// requests have no client of their own, so each operation takes the first
// lane free at its call, per partition.
func lanes(ops []porcupine.Operation) []porcupine.Operation {
	out := slices.Clone(ops)
	slices.SortStableFunc(out, func(a, b porcupine.Operation) int {
		if a.Call < b.Call {
			return -1
		}
		if a.Call > b.Call {
			return 1
		}
		return 0
	})
	free := map[string][]int64{} // partition → each lane's last return
	for i := range out {
		k := out[i].Input.(Input).Key
		ls := free[k]
		lane := slices.IndexFunc(ls, func(ret int64) bool { return ret < out[i].Call })
		if lane < 0 {
			lane = len(ls)
			ls = append(ls, 0)
		}
		ls[lane] = out[i].Return
		free[k] = ls
		out[i].ClientId = lane
	}
	return out
}
