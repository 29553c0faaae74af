package lock

import (
	"context"
	"time"
)

// noLock takes no lock at all: every caller enters the critical section at
// once. It is the baseline of the ladder — concurrency alone is enough to
// read the same stock twice and sell it twice (lost updates, overselling).
type noLock struct{}

func (noLock) acquire(_ context.Context, _ faultPoints, _ keys, _ string, ttl time.Duration) (grant, error) {
	return grant{validity: ttl}, nil
}

func (noLock) release(context.Context, faultPoints, keys, string) error { return nil }

func (noLock) extend(_ context.Context, _ keys, _ string, ttl time.Duration) (time.Duration, error) {
	return ttl, nil
}
