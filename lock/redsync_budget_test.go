package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// redsync's clients are made as its users make them, without go-redis's
// ContextTimeoutEnabled, so its deadline of 5% of the TTL does not cut a
// read from a frozen node short: each try waits out go-redis's 3 s read
// timeout. The caller's budget must bound the answer all the same.
func TestRedsyncAnswersWithinTheBudget(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	c := testsupport.Redis(t, 5, localredis.Options{})
	e := newEnv(t, c)
	e.voting()
	l := e.locker(ladder.Redsync)
	warm := mustAcquire(t, l, "warm", 5*time.Second) // its clients' connections open
	if err := warm.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Nodes[0].Resume() })
	const budget = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	lease, err := l.Acquire(ctx, "k")
	took := time.Since(start)
	if err == nil {
		_ = lease.Release(context.Background())
	} else if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a frozen node of five: want busy, got %v", err)
	}
	if took > budget+300*time.Millisecond {
		t.Fatalf("answered %v after the caller's budget of %v", took.Round(time.Millisecond), budget)
	}
}
