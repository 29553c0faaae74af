package storefront

import (
	"context"
	"net/http"
	"time"
)

// Index is what an instance says of itself in GET /api: its lock settings
// and the variants a request may name. A runner pointed at a running
// instance sizes its faults from these, not from its own defaults.
type Index struct {
	// Lock is the variant used when a request names none.
	Lock string `json:"lock"`
	// Locks are the variants X-Lock-Variant may name here.
	Locks []string `json:"locks"`
	// LockTTLMS and LockWaitMS are the instance's -lock-ttl and -lock-wait
	// in milliseconds; nil when an instance does not say them.
	LockTTLMS  *int64 `json:"lock_ttl_ms"`
	LockWaitMS *int64 `json:"lock_wait_ms"`
}

// LockTTL is the instance's lease TTL, and whether it said one.
func (i Index) LockTTL() (time.Duration, bool) { return ms(i.LockTTLMS) }

// LockWait is how long the instance waits for a busy lock, and whether it
// said so.
func (i Index) LockWait() (time.Duration, bool) { return ms(i.LockWaitMS) }

func ms(p *int64) (time.Duration, bool) {
	if p == nil {
		return 0, false
	}
	return time.Duration(*p) * time.Millisecond, true
}

// Index reads GET /api.
func (a API) Index(ctx context.Context) (Index, error) {
	var i Index
	err := a.do(ctx, "GET /api", http.MethodGet, "/api", nil, &i, false)
	return i, err
}
