package checker

import (
	"fmt"
	"slices"
	"time"

	"flashsale/internal/history"
)

// Record is one line of a history, client or nemesis file, in the format
// internal/history defines for all three.
type Record = history.Record

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
