package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// A frozen node: a Redis process stopped with SIGSTOP keeps its TCP
// connections open and answers nothing, where a stopped one refuses them.

// TestFrozenFirstNodeHotKey: with the first node frozen (it holds the speed
// layer's waiting lines) and another stopped, three of five nodes still
// make a quorum, and concurrent lockers on one hot key all get it within
// their wait, with the speed layer on and off. The control runs the same
// contention with every node up, on lockers of their own. A frozen first
// node once stalled the line: its connection, with nothing answered since
// the handshake, counted as answering, and the waiter whose turn it was
// waited for the line's answer at every look.
func TestFrozenFirstNodeHotKey(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	c := testsupport.Redis(t, 5, localredis.Options{})
	const lockers, rounds, wait = 8, 3, time.Second
	modes := []bool{true, false}
	control, frozen := map[bool]*env{}, map[bool]*env{}
	for _, fast := range modes {
		control[fast] = newEnv(t, c, lock.Options{FastOff: !fast})
		frozen[fast] = newEnv(t, c, lock.Options{FastOff: !fast})
		frozen[fast].aged(c)
		control[fast].aged(c)
		// The frozen set's connections are open, nothing asked on them
		// yet, as in an app that has just started.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := frozen[fast].ls.VotesOpen(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, fast := range modes {
		got, errs, _ := contend(control[fast].locker(lock.Redlock), "hot", lockers, rounds, wait)
		if got != lockers*rounds || len(errs) > 0 {
			t.Fatalf("control, every node up, fast=%v: %d of %d granted within %v; errors: %v", fast, got, lockers*rounds, wait, errs)
		}
	}

	if err := c.Nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Nodes[0].Resume() }) // before the cluster stops
	if err := c.Nodes[1].Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, fast := range modes {
		got, errs, _ := contend(frozen[fast].locker(lock.Redlock), "hot", lockers, rounds, wait)
		if got != lockers*rounds || len(errs) > 0 {
			t.Errorf("node 0 frozen, node 1 stopped, fast=%v: %d of %d granted within %v; errors: %v", fast, got, lockers*rounds, wait, errs)
		}
	}
}

// contend has lockers goroutines each acquire key rounds times, each time
// waiting at most wait, and give it back at once. It returns how many
// acquisitions were granted, the errors of the others (and of releases),
// and how long the slowest acquisition took to answer.
func contend(l *lock.Locker, key string, lockers, rounds int, wait time.Duration) (int, []error, time.Duration) {
	var (
		mu      sync.Mutex
		granted int
		errs    []error
		slowest time.Duration
		wg      sync.WaitGroup
	)
	for range lockers {
		wg.Go(func() {
			for range rounds {
				began := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				lease, err := l.Acquire(ctx, key)
				cancel()
				took := time.Since(began)
				if err == nil {
					rctx, rcancel := context.WithTimeout(context.Background(), wait)
					if rerr := lease.Release(rctx); rerr != nil {
						err = fmt.Errorf("release: %w", rerr)
					}
					rcancel()
				}
				mu.Lock()
				if lease != nil {
					granted++
				}
				if err != nil {
					errs = append(errs, err)
				}
				slowest = max(slowest, took)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return granted, errs, slowest
}
