package chaos

import (
	"fmt"
	"strings"
	"time"

	"flashsale/loadtest/output"
)

// heading says what the recovery figures are, against the promise.
func (s *RecoverySummary) heading(ttl string) string {
	return fmt.Sprintf("node-operator faults: how long after the action ended (its undo, or the action itself when nothing undoes it) "+
		"the node voted again for a new client; the design promises the largest lease TTL (%s) + %v = %v; a probe tries for %v",
		ttl, recoverySlack, time.Duration(s.PromiseMS)*time.Millisecond, time.Duration(s.BoundMS)*time.Millisecond)
}

// mark is " OVER" for an action some of whose faults took longer than the
// promise (or never recovered), else "".
func (a ActionRecovery) mark() string {
	if a.OverPromise > 0 {
		return " OVER"
	}
	return ""
}

// ms renders a millisecond figure, "—" for none.
func ms(p *int64) string {
	if p == nil {
		return "—"
	}
	return (time.Duration(*p) * time.Millisecond).String()
}

// recoveryText writes the per-action recovery table, if the run had
// node-operator faults.
func (r *Report) recoveryText(b *strings.Builder) {
	s := r.RecoverySummary
	if s == nil {
		return
	}
	fmt.Fprintf(b, "\n%s:\n", s.heading(r.LockTTL))
	fmt.Fprintf(b, "  %-20s %6s %8s %8s %6s %13s\n", "action", "faults", "median", "max", "never", "over promise")
	for _, a := range s.ByAction {
		fmt.Fprintf(b, "  %-20s %6d %8s %8s %6d %13d%s\n", a.Action, a.Count, ms(a.MedianMS), ms(a.MaxMS), a.Never, a.OverPromise, a.mark())
	}
	for _, rec := range r.OperatorRecovery {
		if rec.Error != "" {
			fmt.Fprintf(b, "  %s on node %d at t+%s: %s\n", rec.Action, rec.Node, r.since(rec.Done), rec.Error)
		}
	}
}

// recoveryHTML writes the per-action recovery table, if the run had
// node-operator faults.
func (r *Report) recoveryHTML(b *strings.Builder) {
	s := r.RecoverySummary
	if s == nil {
		return
	}
	esc := output.Esc
	fmt.Fprintf(b, "<h2>Operator actions: recovery</h2><p>%s.</p>", esc(s.heading(r.LockTTL)))
	b.WriteString("<table><tr><th>action</th><th>faults</th><th>median</th><th>max</th><th>never recovered</th><th>over the promise</th></tr>")
	for _, a := range s.ByAction {
		class := "ok"
		if a.OverPromise > 0 {
			class = "bug"
		}
		fmt.Fprintf(b, `<tr class="%s"><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td></tr>`,
			class, esc(a.Action), a.Count, ms(a.MedianMS), ms(a.MaxMS), a.Never, a.OverPromise)
	}
	b.WriteString("</table>")
}
