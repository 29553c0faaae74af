package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"flashsale/loadtest"
	"flashsale/loadtest/checker"
	"flashsale/loadtest/linear"
	"flashsale/loadtest/output"
	"flashsale/loadtest/storefront"
)

// checkTimeout bounds porcupine's check of one variant's history.
const checkTimeout = time.Minute

// readTimeout bounds one read of the stock or the seat map: an instance
// the nemesis paused answers nothing, and a read that saw nothing is not
// recorded.
const readTimeout = 2 * time.Second

// newHistories starts one history per variant, of its SKUs as the sale
// begins (read back right after the reset).
func newHistories(ctx context.Context, api storefront.API, scopes map[string]checker.Scope) (map[string]*linear.History, error) {
	stock, err := api.Stock(ctx)
	if err != nil {
		return nil, err
	}
	hs := map[string]*linear.History{}
	for v, sc := range scopes {
		initial := map[string]int64{}
		for _, sku := range sc.SKUs {
			initial[sku] = stock[sku]
		}
		hs[v] = linear.New(initial)
	}
	return hs, nil
}

// readDuring reads the stock and the seat map into every variant's history
// every readEvery, from the instances in turn, until ctx ends.
func readDuring(ctx context.Context, fleet storefront.Fleet, hs map[string]*linear.History, scopes map[string]checker.Scope, event string) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		readInto(ctx, fleet[i%len(fleet)], hs, scopes, event)
	}
}

// readInto is one read of the stock and the seats, each variant's own
// seats into its history.
func readInto(ctx context.Context, api storefront.API, hs map[string]*linear.History, scopes map[string]checker.Scope, event string) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	call := time.Now()
	if stock, err := api.Stock(rctx); err == nil {
		ret := time.Now()
		for _, h := range hs {
			h.Stock(call, ret, stock)
		}
	}
	call = time.Now()
	holders, err := api.Holders(rctx, event)
	if err != nil {
		return
	}
	ret := time.Now()
	for v, h := range hs {
		mine := map[string]string{}
		for _, s := range scopes[v].Seats {
			mine[s] = holders[s]
		}
		h.Seats(call, ret, event, mine)
	}
}

// historyFile is where a run keeps the history porcupine was given for
// variant, for Recheck.
func historyFile(dir, variant string) string {
	return filepath.Join(dir, "histories", output.FileName(variant)+".jsonl")
}

// historyNote marks the notes of drawing and writing histories, which a
// recheck writes anew.
const historyNote = ": the history"

// checkHistories has porcupine check every variant's history, keeps each
// under dir/histories, draws the ones that are not linearizable, and
// compares each verdict with the checker's data.
func (r *Report) checkHistories(hs map[string]*linear.History, dir string) {
	for name, v := range r.Variants {
		h := hs[name]
		if h == nil {
			continue
		}
		if err := h.WriteFile(historyFile(dir, name)); err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s%s: writing it: %v", name, historyNote, err))
		}
		res := h.Check(checkTimeout)
		v.Linear, v.Linearizable = &res, res.Linearizable()
		v.HistoryFile = ""
		if res.Result == linear.NotLinearizable {
			rel := filepath.Join("histories", output.FileName(name)+".html")
			if err := res.Visualize(filepath.Join(dir, rel), checkTimeout); err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("%s%s: drawing it: %v", name, historyNote, err))
			} else {
				v.HistoryFile = filepath.ToSlash(rel)
			}
		}
		v.agree(name)
	}
}

// agree compares porcupine's verdict with the data the checker read: an
// oversale, a lost update, a double booking or a lost acknowledged order
// is a history that is not linearizable, and the reverse. Lock overlaps,
// stale writes and stuck locks are no part of it: a shopper cannot see
// them in the stock or the seats.
func (v *Variant) agree(name string) {
	v.Disagreement, v.DisagreementDeclared = "", ""
	if v.Linearizable == nil {
		return
	}
	broke := v.OversoldUnits+v.LostUpdates+v.DoubleBookedSeats+v.LostAcknowledgedOrders > 0
	switch {
	case broke && *v.Linearizable:
		v.Disagreement = fmt.Sprintf("the data shows %d oversold, %d lost updates, %d double-booked, %d lost acknowledged orders, but the history the shoppers saw is linearizable",
			v.OversoldUnits, v.LostUpdates, v.DoubleBookedSeats, v.LostAcknowledgedOrders)
	case !broke && !*v.Linearizable:
		var where []string
		if v.Linear != nil {
			where = v.Linear.Illegal
		}
		v.Disagreement = fmt.Sprintf("the history the shoppers saw is not linearizable (%v), but the data shows no oversale, lost update, double booking or lost acknowledged order", where)
	}
	if v.Disagreement != "" {
		v.DisagreementDeclared = loadtest.DeclaredDisagreement(name)
	}
}

// linearMark is porcupine's verdict as the tables show it.
func (v *Variant) linearMark() string { return v.Linear.Mark() }
