package ladder

import (
	"context"
	"time"
)

// None is the name of no lock at all.
const None = "none"

// noLock takes no lock at all: every caller enters the critical section at
// once. It is the baseline of the ladder — concurrency alone is enough to
// read the same stock twice and sell it twice (lost updates, overselling).
type noLock struct{}

func (noLock) Acquire(_ context.Context, _ step, _, _ string, ttl time.Duration) (time.Duration, error) {
	return ttl, nil
}

func (noLock) Release(context.Context, step, string, string) error { return nil }

func (noLock) Extend(_ context.Context, _, _ string, ttl time.Duration) (time.Duration, error) {
	return ttl, nil
}
