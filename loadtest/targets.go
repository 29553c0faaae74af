package loadtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"flashsale/loadtest/storefront"
)

// resetWarning is said before the first cell against running instances:
// the runner replaces their sale, and someone may be using it.
const resetWarning = "every cell resets the sale on %s (POST /api/admin/reset: the products, orders, bookings and lock keys there are replaced by the runner's catalogue) and sets their fault plan; the last cell leaves its sale and an empty plan behind"

// resetLogLine is resetWarning as the log says it: one line whose words do
// not change, the targets a field of its own (the workshop page says it in
// its reader's language from them).
const resetLogLine = "every cell resets the sale on the targets and sets their fault plan; the last cell leaves its sale and an empty plan behind"

// fromInstances reads what running instances say of themselves (GET /api)
// and makes the run agree with it: the lease TTL and lock wait the faults
// are sized by are the instances', and every variant the run names is one
// they serve. A setting given that differs from theirs refuses the run
// rather than sizing faults for a lease the instances do not have (a pause
// shorter than their TTL would make a breaking cell hold: a false NO-DEMO).
// named says whether the variants were chosen by name (not "all"): a named
// variant the instances do not serve refuses the run, an unnamed one is
// left out with a note.
func (c *Config) fromInstances(ctx context.Context, named bool) (notes []string, err error) {
	var first storefront.Index
	for i, base := range c.Targets {
		api := storefront.API{Base: base, Token: c.AdminToken}
		idx, err := api.Index(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the settings of %s: %w", base, err)
		}
		if i == 0 {
			first = idx
			continue
		}
		if !sameLocks(first, idx) {
			return nil, fmt.Errorf("the instances disagree: %s says %s, %s says %s; attack instances started alike", c.Targets[0], describe(first), base, describe(idx))
		}
	}
	where := strings.Join(c.Targets, ", ")
	ttl, said := first.LockTTL()
	switch {
	case !said && c.LockTTL == 0:
		return nil, fmt.Errorf("%s does not say its lock TTL in GET /api (an older storefront?): give it with -lock-ttl, or the pause faults would be sized for a lease it may not have", where)
	case !said:
		notes = append(notes, fmt.Sprintf("the instances do not say their lock TTL; the faults are sized for the %v given", c.LockTTL))
	case c.LockTTL == 0:
		c.LockTTL = ttl
		notes = append(notes, fmt.Sprintf("lock TTL %v, lock wait %s and variants as the instances say (GET /api); the faults are sized for that TTL", ttl, waitOf(first)))
	case c.LockTTL != ttl:
		return nil, fmt.Errorf("-lock-ttl %v, but %s run with a %v lock TTL (GET /api): the pause faults would be sized for a lease they do not have, and a cell that must break could hold; leave -lock-ttl out to use theirs, or restart them with -lock-ttl %v", c.LockTTL, where, ttl, c.LockTTL)
	}
	if wait, said := first.LockWait(); said {
		switch {
		case c.LockWait == 0:
			c.LockWait = wait
		case c.LockWait != wait:
			return nil, fmt.Errorf("-lock-wait %v, but %s wait %v for a busy lock (GET /api); leave -lock-wait out to use theirs, or restart them with -lock-wait %v", c.LockWait, where, wait, c.LockWait)
		}
	}
	var missing []string
	for _, v := range c.Variants {
		if !slices.Contains(first.Locks, v) {
			missing = append(missing, v)
		}
	}
	switch {
	case len(missing) == 0:
	case named:
		return nil, fmt.Errorf("%s do not serve %s (they allow %s; -variants on the storefront): every request would be refused", where, strings.Join(missing, ", "), strings.Join(first.Locks, ", "))
	default:
		c.Variants = slices.DeleteFunc(c.Variants, func(v string) bool { return slices.Contains(missing, v) })
		if len(c.Variants) == 0 {
			return nil, fmt.Errorf("%s serve none of the runner's variants (they allow %s)", where, strings.Join(first.Locks, ", "))
		}
		notes = append(notes, fmt.Sprintf("the instances do not serve %s; those rows are left out", strings.Join(missing, ", ")))
	}
	return notes, nil
}

// sameLocks reports whether two instances say the same lock settings.
func sameLocks(a, b storefront.Index) bool {
	at, _ := a.LockTTL()
	bt, _ := b.LockTTL()
	aw, _ := a.LockWait()
	bw, _ := b.LockWait()
	return at == bt && aw == bw && slices.Equal(a.Locks, b.Locks)
}

func describe(i storefront.Index) string {
	ttl, _ := i.LockTTL()
	return fmt.Sprintf("lock TTL %v, lock wait %s, variants %s", ttl, waitOf(i), strings.Join(i.Locks, ","))
}

func waitOf(i storefront.Index) string {
	if w, ok := i.LockWait(); ok {
		return w.String()
	}
	return "unsaid"
}

// namedVariants reports whether a selection names variants rather than
// taking all of them.
func namedVariants(sel []string) bool {
	return len(sel) > 0 && !(len(sel) == 1 && sel[0] == "all")
}

// probeTimeout bounds reading the instances' settings.
const probeTimeout = 10 * time.Second
