package loadtest

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"flashsale/loadtest/linear"
	"flashsale/loadtest/output"
	"flashsale/loadtest/storefront"
)

// readEvery is how often a cell's shoppers read the stock and the seat map
// while the attack runs: reads make a lost update visible to the checker,
// not only an oversale.
const readEvery = 250 * time.Millisecond

// DefaultCheckTimeout bounds porcupine's check of one cell's history.
const DefaultCheckTimeout = 30 * time.Second

// newHistory is the history of a sale that starts as cat does.
func newHistory(cat storefront.Catalogue) *linear.History {
	initial := make(map[string]int64, len(cat.Products))
	for _, p := range cat.Products {
		initial[p.SKU] = p.Stock
	}
	return linear.New(initial)
}

// readDuring reads the stock and the seats of event into h every
// readEvery, from the instances in turn, until ctx ends.
func readDuring(ctx context.Context, fleet storefront.Fleet, h *linear.History, event string) {
	t := time.NewTicker(readEvery)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ReadInto(ctx, fleet[i%len(fleet)], h, event)
	}
}

// ReadInto reads the stock, and the seats of event when it is not "", from
// api into h. A read that fails saw nothing and is not recorded.
func ReadInto(ctx context.Context, api storefront.API, h *linear.History, event string) {
	call := time.Now()
	if stock, err := api.Stock(ctx); err == nil {
		h.Stock(call, time.Now(), stock)
	}
	if event == "" {
		return
	}
	call = time.Now()
	if holders, err := api.Holders(ctx, event); err == nil {
		h.Seats(call, time.Now(), event, holders)
	}
}

// check has porcupine check the cell's history, and draws it under the
// output directory when it is not linearizable.
func (r *cellRun) check(h *linear.History) {
	timeout := r.cfg.CheckTimeout
	v := h.Check(timeout)
	c := &r.c
	c.Linear, c.Linearizable = &v, v.Linearizable()
	if v.Result == linear.Linearizable || r.cfg.OutDir == "" {
		return
	}
	base := filepath.Join(r.cfg.OutDir, "histories", r.sc.Name, output.FileName(c.Variant))
	if err := h.WriteFile(base + ".jsonl"); err != nil {
		c.Notes = append(c.Notes, "writing the history: "+err.Error())
	}
	if v.Result != linear.NotLinearizable {
		return
	}
	if err := v.Visualize(base+".html", timeout); err != nil {
		c.Notes = append(c.Notes, "drawing the history: "+err.Error())
		return
	}
	c.HistoryFile = filepath.ToSlash(filepath.Join("histories", r.sc.Name, output.FileName(c.Variant)+".html"))
}

// agree compares porcupine's verdict with the audit's: an oversale, a lost
// update or a double booking in the audit is a history that is not
// linearizable, and the reverse. Stuck locks and the cross-check are no
// part of it: they are not the sale's data. A check that ran out of time
// agrees with nothing and disagrees with nothing.
func (c *Cell) agree() {
	if c.Linearizable == nil {
		return
	}
	a := c.Audit
	broke := a.OversoldUnits > 0 || a.LostUpdates > 0 || a.DoubleBookedSeats > 0
	switch {
	case broke && *c.Linearizable:
		c.Disagreement = fmt.Sprintf("the audit found %d oversold, %d lost updates, %d double-booked, but the history the shoppers saw is linearizable",
			a.OversoldUnits, a.LostUpdates, a.DoubleBookedSeats)
	case !broke && !*c.Linearizable:
		var where []string
		if c.Linear != nil {
			where = c.Linear.Illegal
		}
		c.Disagreement = fmt.Sprintf("the history the shoppers saw is not linearizable (%v), but the audit found no oversale, lost update or double booking", where)
	}
	if c.Disagreement != "" {
		c.DisagreementDeclared = DeclaredDisagreement(c.Variant)
	}
}

// linearFigures sums porcupine's checks of the cells up in one line.
func linearFigures(cells []Cell) string {
	var f linear.Figures
	verdicts := map[string]int{}
	for _, c := range cells {
		if c.Linear == nil {
			continue
		}
		verdicts[c.Linear.Result]++
		g := c.Linear.Figures
		f.Ops, f.Writes, f.Maybe, f.Reads, f.Dropped = f.Ops+g.Ops, f.Writes+g.Writes, f.Maybe+g.Maybe, f.Reads+g.Reads, f.Dropped+g.Dropped
		f.Resends, f.MultiUnit, f.Contradicted = f.Resends+g.Resends, f.MultiUnit+g.MultiUnit, f.Contradicted+g.Contradicted
	}
	return fmt.Sprintf("porcupine: %d histories linearizable, %d not, %d unknown; %d operations (%d writes, %d of unknown outcome, %d reads), "+
		"%d resends folded into their orders, %d orders of 2 or 3 units, %d contradicted by their own answers, "+
		"%d answers left out (a 503 whose contract says nothing was taken, or a request never answered that the store kept no order of: no operation to check)",
		verdicts[linear.Linearizable], verdicts[linear.NotLinearizable], verdicts[linear.Unknown], f.Ops, f.Writes, f.Maybe, f.Reads,
		f.Resends, f.MultiUnit, f.Contradicted, f.Dropped)
}

// Taught reports whether the curriculum makes a claim of the cell (it
// holds, or it breaks): a disagreement there is counted in the report.
func (c *Cell) Taught() bool { return c.Expected == Holds || c.Expected == Breaks }

// LinearMark is porcupine's verdict as a table shows it: "yes", "NO",
// "unknown", or "" when no check ran.
func (c *Cell) LinearMark() string { return c.Linear.Mark() }
