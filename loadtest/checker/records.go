package checker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// Record is one line of a history, client or nemesis file. The checker's
// own reading of the format: the fields it needs, nothing shared with the
// code that wrote them.
type Record struct {
	Time time.Time `json:"t"`
	// Kind is "lease" and "write" (an app's history), "ack" (the client's
	// record of an answer) or "nemesis" (a fault).
	Kind string `json:"kind"`
	Proc string `json:"proc,omitempty"`
	// Op is a lease's "acquired", "released" or "lost"; a write's "stock"
	// or "seat"; an ack's "order" or "seat"; a fault's "start" or "end".
	Op string `json:"op"`

	Variant    string     `json:"variant,omitempty"`
	Key        string     `json:"key,omitempty"`
	Owner      string     `json:"owner,omitempty"`
	Token      uint64     `json:"token,omitempty"`
	Fenced     bool       `json:"fenced,omitempty"`
	Acquired   *time.Time `json:"acquired,omitempty"`
	ValidUntil *time.Time `json:"valid_until,omitempty"`
	Err        string     `json:"err,omitempty"`

	SKU   string `json:"sku,omitempty"`
	Stock *int64 `json:"stock,omitempty"`
	Event string `json:"event,omitempty"`
	Seat  string `json:"seat,omitempty"`

	Status         int    `json:"status,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`

	// Fault and Target name a nemesis event ("app-pause", "app 1").
	Fault  string `json:"fault,omitempty"`
	Target string `json:"target,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// ReadFiles reads every record of the given JSON-lines files. A last line
// cut short (a process killed mid-write) is skipped; any other bad line is
// an error.
func ReadFiles(paths ...string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("checker: %w", err)
		}
		recs, err := Read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("checker: %s: %w", p, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// Read reads JSON-lines records from r.
func Read(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var bad error
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		if bad != nil {
			return nil, bad // a bad line that was not the last
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			bad = fmt.Errorf("line %d: %w", line, err)
			continue
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// indexed is the records sorted out by kind.
type indexed struct {
	leases  map[string]*lease // by owner
	writes  []Record
	acks    []Record
	nemesis []Record
}

func index(recs []Record) *indexed {
	h := &indexed{leases: map[string]*lease{}}
	// Releases and losses can only shorten a lease: apply them after every
	// acquire is known, whatever order the files came in.
	var ends []Record
	for _, r := range recs {
		switch r.Kind {
		case "lease":
			if r.Op != "acquired" {
				ends = append(ends, r)
				continue
			}
			if r.Acquired == nil || r.ValidUntil == nil {
				continue
			}
			h.leases[r.Owner] = &lease{owner: r.Owner, key: r.Key, proc: r.Proc, variant: r.Variant,
				token: r.Token, fenced: r.Fenced, acquired: *r.Acquired, end: *r.ValidUntil}
		case "write":
			h.writes = append(h.writes, r)
		case "ack":
			h.acks = append(h.acks, r)
		case "nemesis":
			h.nemesis = append(h.nemesis, r)
		}
	}
	for _, r := range ends {
		if l := h.leases[r.Owner]; l != nil && r.Time.Before(l.end) {
			l.end = r.Time
		}
	}
	byTime := func(a, b Record) int { return a.Time.Compare(b.Time) }
	slices.SortStableFunc(h.writes, byTime)
	slices.SortStableFunc(h.acks, byTime)
	slices.SortStableFunc(h.nemesis, byTime)
	return h
}

func (h *indexed) leasesFor(variant string, keys map[string]bool) []lease {
	var out []lease
	for _, l := range h.leases {
		if l.variant == variant && keys[l.key] {
			out = append(out, *l)
		}
	}
	return out
}

// writesFor are the writes made under the given leases, in time order.
func (h *indexed) writesFor(ls []lease) []Record {
	owners := map[string]bool{}
	for _, l := range ls {
		owners[l.owner] = true
	}
	var out []Record
	for _, w := range h.writes {
		if owners[w.Owner] {
			out = append(out, w)
		}
	}
	return out
}

func (h *indexed) acksFor(variant string) []Record {
	var out []Record
	for _, a := range h.acks {
		if a.Variant == variant {
			out = append(out, a)
		}
	}
	return out
}

// around names the nemesis events active at t or begun within d before it.
func (h *indexed) around(t time.Time, d time.Duration) []string {
	type span struct {
		rec  Record
		end  time.Time
		open bool
	}
	var spans []*span
	open := map[string]*span{}
	for _, r := range h.nemesis {
		if r.Time.After(t) {
			break
		}
		id := r.Fault + "|" + r.Target
		switch r.Op {
		case "end":
			if s := open[id]; s != nil {
				s.end, s.open = r.Time, false
				delete(open, id)
			}
		default:
			s := &span{rec: r, open: r.Op == "start"}
			if !s.open {
				s.end = r.Time // an instant event
			} else {
				open[id] = s
			}
			spans = append(spans, s)
		}
	}
	var out []string
	for _, s := range spans {
		if s.open || !s.end.Before(t.Add(-d)) {
			desc := fmt.Sprintf("%s %s at -%.2fs", s.rec.Fault, s.rec.Target, t.Sub(s.rec.Time).Seconds())
			if s.open {
				desc += " (still on)"
			}
			out = append(out, desc)
		}
	}
	return out
}
