package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"flashsale/loadtest/storefront"

	"github.com/redis/go-redis/v9"
)

// DefaultLockPattern matches the storefront's lock keys (its default key
// namespace "flashsale:"). It is not part of the HTTP contract, so the
// command lets it be changed.
const DefaultLockPattern = "flashsale:lock:*"

// StuckLock is a lock key the runner found without a TTL: nobody will ever
// acquire that lock again.
type StuckLock struct {
	Node string `json:"node"`
	Key  string `json:"key"`
}

// ScanStuckLocks looks at every Redis node itself, not through the app, for
// keys matching pattern that have no TTL. It reports the keys found on the
// nodes that answered and an error naming those that did not.
func ScanStuckLocks(ctx context.Context, urls []string, pattern string) ([]StuckLock, error) {
	var (
		mu    sync.Mutex
		found []StuckLock
		wg    sync.WaitGroup
	)
	errs := make([]error, len(urls))
	for i, u := range urls {
		wg.Go(func() {
			keys, err := scanNode(ctx, u, pattern)
			if err != nil {
				errs[i] = fmt.Errorf("node %d: %w", i, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				found = append(found, StuckLock{Node: fmt.Sprint(i), Key: k})
			}
		})
	}
	wg.Wait()
	return found, errors.Join(errs...)
}

func scanNode(ctx context.Context, rawURL, pattern string) ([]string, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if err := storefront.Loopback("http://" + o.Addr); err != nil {
		return nil, err
	}
	o.MaxRetries = 2
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	rdb := redis.NewClient(o)
	defer rdb.Close()
	var stuck []string
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		ttl, err := rdb.PTTL(ctx, iter.Val()).Result()
		if err != nil {
			return stuck, err
		}
		// PTTL answers -1 for a key without a TTL (go-redis keeps the raw
		// -1 as a Duration) and -2 for a key that vanished meanwhile.
		if ttl == -1 {
			stuck = append(stuck, iter.Val())
		}
	}
	return stuck, iter.Err()
}
