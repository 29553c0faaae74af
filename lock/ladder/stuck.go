package ladder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/keys"
)

// scanTimeout bounds a whole-keyspace walk of one node, so a paused node
// delays an audit or a reset by this much at most.
const scanTimeout = 2 * time.Second

// StuckLock is a lock key without a TTL: nobody will ever acquire it again
// (setnx-expire's deadlock).
type StuckLock struct {
	Node string `json:"node"`
	Key  string `json:"key"` // the lock's name
}

// StuckLocks scans every node, the lockers' nodes under namespace, for lock
// keys that have no TTL. Nodes that do not answer are reported in the
// error; the keys found on the others are still returned.
func StuckLocks(ctx context.Context, nodes []*redis.Client, namespace string) ([]StuckLock, error) {
	var mu sync.Mutex
	var out []StuckLock
	err := eachLockKey(ctx, nodes, namespace, func(ctx context.Context, n *redis.Client, key string) error {
		ttl, err := n.PTTL(ctx, key).Result()
		if err != nil {
			return err
		}
		if ttl == -1 { // go-redis reports "no TTL" as -1 (and -2 for gone)
			mu.Lock()
			out = append(out, StuckLock{Node: n.Options().Addr, Key: keys.Name(namespace, key)})
			mu.Unlock()
		}
		return nil
	})
	return out, err
}

// Reset deletes every lock under namespace on every node, for a clean sale.
// The fencing counters stay: tokens keep growing across resets, so a holder
// paused across one can never carry the same token as a holder of the new
// sale. Nodes that do not answer are reported in the error.
func Reset(ctx context.Context, nodes []*redis.Client, namespace string) error {
	return eachLockKey(ctx, nodes, namespace, func(ctx context.Context, n *redis.Client, key string) error {
		return n.Del(ctx, key).Err()
	})
}

// eachLockKey runs fn on every lock key of every node, the nodes at once
// and each node's keys in SCAN order, stopping a node at fn's first error.
// The nodes that failed are reported in the error.
func eachLockKey(ctx context.Context, nodes []*redis.Client, namespace string, fn func(ctx context.Context, n *redis.Client, key string) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, scanTimeout)
			defer cancel()
			iter := n.Scan(ctx, 0, keys.Locks(namespace), 1000).Iterator()
			for iter.Next(ctx) {
				if err := fn(ctx, n, iter.Val()); err != nil {
					errs[i] = fmt.Errorf("node %s: %w", n.Options().Addr, err)
					return
				}
			}
			if err := iter.Err(); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", n.Options().Addr, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
