// Package clock holds the one way the project waits: for a duration, or
// less when the context ends first.
package clock

import (
	"context"
	"time"
)

// Sleep waits d, or less if ctx ends first; it reports whether d passed.
// A d of zero or less does not wait, and reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
