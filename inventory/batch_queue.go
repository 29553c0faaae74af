package inventory

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// batchQueues are the queues of the SKUs whose lock is busy in this process,
// by variant and SKU. A queue is in the map exactly while its driver runs.
type batchQueues struct {
	mu     sync.Mutex
	queues map[string]*batchQueue
}

// batchQueue is the orders waiting for one SKU's next lease, oldest first.
type batchQueue struct {
	waiting []*batchOrder
}

// batchOrder is one request in a queue. Once taken (by a batch, or answered
// by the driver) it must wait for its answer; before that, it may leave.
type batchOrder struct {
	ctx    context.Context
	p      purchase    // its deadline: arrival + lock-wait budget
	taken  bool        // guarded by batchQueues.mu
	answer chan answer // buffered: the driver never blocks on it
}

// answer is what a request of a batch is told.
type answer struct {
	order  Order
	replay bool
	err    error
}

// leave takes o out of its queue unless it was taken already.
func (b *batchQueues) leave(queue *batchQueue, o *batchOrder) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o.taken {
		return false
	}
	for i, w := range queue.waiting {
		if w == o {
			queue.waiting = append(queue.waiting[:i], queue.waiting[i+1:]...)
			break
		}
	}
	return true
}

// next answers busy the waiters whose budget has run out and returns the
// latest budget of the others: how long the next lease is worth waiting
// for. With nobody waiting, the queue is closed (removed from the map, so
// the next order starts a new driver) and ok is false.
func (b *batchQueues) next(key string, queue *batchQueue, lockWait time.Duration) (deadline time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	kept := queue.waiting[:0]
	for _, o := range queue.waiting {
		if !now.Before(o.p.deadline) {
			o.taken = true
			o.answer <- answer{err: fmt.Errorf("%w: sku:%s not obtained within %v", ErrLockBusy, o.p.SKU, lockWait)}
			continue
		}
		kept = append(kept, o)
		deadline = o.p.deadline
	}
	clear(queue.waiting[len(kept):])
	queue.waiting = kept
	if len(kept) == 0 {
		delete(b.queues, key)
		return time.Time{}, false
	}
	return deadline, true
}

// take removes up to n waiting orders, oldest first, for one batch; or
// answers every waiting order with err, when err is not nil.
func (b *batchQueues) take(queue *batchQueue, n int, err error) []*batchOrder {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, len(queue.waiting))
	if err != nil {
		n = len(queue.waiting)
	}
	batch := make([]*batchOrder, n)
	copy(batch, queue.waiting)
	queue.waiting = append(queue.waiting[:0], queue.waiting[n:]...)
	for _, o := range batch {
		o.taken = true
		if err != nil {
			o.answer <- answer{err: err}
		}
	}
	return batch
}
