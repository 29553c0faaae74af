package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// recoverySlack is what the design allows a node beyond the largest lease
// TTL in use to vote again after an operator action ends: the sit-out
// (TTL plus drift) counts from when a client saw the action, and a new
// client meets the node and tries its vote on top of that.
const recoverySlack = 2 * time.Second

// RecoveryPromise is how soon after an operator action ends the design
// promises that a node votes again, for a largest lease TTL of ttl.
func RecoveryPromise(ttl time.Duration) time.Duration { return ttl + recoverySlack }

// recoveryBound is how long a recovery probe tries before it calls the node
// never recovered.
func recoveryBound(ttl time.Duration) time.Duration { return 4*ttl + 10*time.Second }

// OperatorRecovery is one node-operator fault and how long after it a new
// client's lock counted the node's vote again.
type OperatorRecovery struct {
	Action string    `json:"action"`
	Node   int       `json:"node"`
	Done   time.Time `json:"done"`
	// Undone is when the action was undone; null for an action with no
	// undo, whose recovery counts from Done.
	Undone *time.Time `json:"undone"`
	// RecoveredAfterMS is the time from the undo (or Done) to the probe's
	// first grant; null if it had none within the probe's bound.
	RecoveredAfterMS *int64 `json:"recovered_after_ms"`
	// OverPromise says it took longer than RecoveryPromise, or never came.
	OverPromise bool `json:"over_promise,omitempty"`
	// Error is why the node was not probed, or what failed on the way.
	Error string `json:"error,omitempty"`
}

// RecoverySummary sums the operator faults' recoveries up per action.
type RecoverySummary struct {
	// PromiseMS is RecoveryPromise for the run's TTL; BoundMS is how long a
	// probe tried.
	PromiseMS int64            `json:"promise_ms"`
	BoundMS   int64            `json:"bound_ms"`
	ByAction  []ActionRecovery `json:"by_action"`
}

// ActionRecovery is one action's recoveries: Count probed, the median and
// largest of those that recovered, Never those that did not within the
// bound, OverPromise those slower than the promise (Never included).
type ActionRecovery struct {
	Action      string `json:"action"`
	Count       int    `json:"count"`
	MedianMS    *int64 `json:"median_ms"`
	MaxMS       *int64 `json:"max_ms"`
	Never       int    `json:"never"`
	OverPromise int    `json:"over_promise"`
}

// recoveries runs a probe after every node-operator fault and collects what
// they found.
type recoveries struct {
	ctx context.Context // the run's own: an interrupt stops every probe
	ttl time.Duration
	end time.Time // the end of the clients' run: no probe tries past it plus the bound
	wg  sync.WaitGroup
	mu  sync.Mutex
	out []OperatorRecovery
}

func newRecoveries(ctx context.Context, ttl time.Duration) *recoveries {
	return &recoveries{ctx: ctx, ttl: ttl}
}

// probe starts a probe of the node at url, whose action ended at from
// (undone, or done when undone is nil), unless err says the action failed.
func (r *recoveries) probe(e NemesisEvent, url string, done time.Time, undone *time.Time, err error) {
	rec := OperatorRecovery{Action: e.Action, Node: e.Nodes[0], Done: done, Undone: undone}
	from := done
	if undone != nil {
		from = *undone
	}
	o, perr := redis.ParseURL(url)
	if err == nil {
		err = perr
	}
	if err != nil {
		rec.Error = err.Error()
		r.add(rec)
		return
	}
	deadline := from.Add(recoveryBound(r.ttl))
	if last := r.end.Add(recoveryBound(r.ttl)); !r.end.IsZero() && last.Before(deadline) {
		deadline = last
	}
	key := fmt.Sprintf("node%d-%d", rec.Node, from.UnixNano())
	r.wg.Go(func() {
		ctx, cancel := context.WithDeadline(r.ctx, deadline)
		defer cancel()
		at, err := firstGrant(ctx, o, r.ttl, key)
		switch {
		case err != nil:
			rec.Error = err.Error()
		case !at.IsZero():
			ms := at.Sub(from).Milliseconds()
			rec.RecoveredAfterMS = &ms
		}
		rec.OverPromise = rec.RecoveredAfterMS == nil || *rec.RecoveredAfterMS > RecoveryPromise(r.ttl).Milliseconds()
		r.add(rec)
	})
}

func (r *recoveries) add(rec OperatorRecovery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out = append(r.out, rec)
}

// wait waits for every probe and returns what they found, in the order
// the actions were done.
func (r *recoveries) wait() []OperatorRecovery {
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.out)
	slices.SortStableFunc(out, func(a, b OperatorRecovery) int { return a.Done.Compare(b.Done) })
	return out
}

// summarize sums recs up per action, in OperatorActions' order; a record
// with an error is left out.
func summarize(recs []OperatorRecovery, ttl time.Duration) *RecoverySummary {
	s := &RecoverySummary{PromiseMS: RecoveryPromise(ttl).Milliseconds(), BoundMS: recoveryBound(ttl).Milliseconds()}
	for _, a := range OperatorActions {
		ar := ActionRecovery{Action: a.Name}
		var ms []int64
		for _, rec := range recs {
			if rec.Action != a.Name || rec.Error != "" {
				continue
			}
			ar.Count++
			if rec.OverPromise {
				ar.OverPromise++
			}
			if rec.RecoveredAfterMS == nil {
				ar.Never++
				continue
			}
			ms = append(ms, *rec.RecoveredAfterMS)
		}
		if ar.Count == 0 {
			continue
		}
		if len(ms) > 0 {
			slices.Sort(ms)
			med, top := ms[len(ms)/2], ms[len(ms)-1]
			if len(ms)%2 == 0 {
				med = (ms[len(ms)/2-1] + ms[len(ms)/2]) / 2
			}
			ar.MedianMS, ar.MaxMS = &med, &top
		}
		s.ByAction = append(s.ByAction, ar)
	}
	return s
}
