package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/lock"
)

// ExampleClient connects to one node, picks a variant by name and holds a
// key for a critical section.
func ExampleClient() {
	node := startNode()
	defer node.Stop()

	client, err := lock.New([]*redis.Options{{Addr: node.Addrs()[0]}}, lock.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	locker, err := client.Locker(lock.Lua)
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := locker.Acquire(ctx, "sku:hot")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", lease.Key())
	// The critical section: read the stock, decide, write it back.
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	// Output:
	// holding sku:hot
	// released
}

// ExampleLocker_TryAcquire shows a busy key: one attempt, or a wait that
// runs out, is answered with ErrNotAcquired.
func ExampleLocker_TryAcquire() {
	// A TTL far longer than the example, so the first lease cannot run out.
	locker, stop := startLocker(lock.Lua, lock.Options{TTL: time.Minute})
	defer stop()
	ctx := context.Background()
	first, err := locker.Acquire(ctx, "sku:hot")
	if err != nil {
		log.Fatal(err)
	}
	defer first.Release(ctx)

	_, err = locker.TryAcquire(ctx, "sku:hot")
	fmt.Println("one attempt, busy:", errors.Is(err, lock.ErrNotAcquired))

	wait, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = locker.Acquire(wait, "sku:hot")
	fmt.Println("a wait, busy:", errors.Is(err, lock.ErrNotAcquired), "timed out:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// one attempt, busy: true
	// a wait, busy: true timed out: true
}

// ExampleLease_Token shows the fencing tokens of a fenced variant: every
// grant of a key carries a larger one, for the store to check its writes
// against.
func ExampleLease_Token() {
	locker, stop := startLocker(lock.LuaFence, lock.Options{})
	defer stop()
	ctx := context.Background()
	for range 3 {
		lease, err := locker.Acquire(ctx, "sku:hot")
		if err != nil {
			log.Fatal(err)
		}
		token, fenced := lease.Token()
		fmt.Println("token", token, "fenced", fenced)
		if err := lease.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// token 1 fenced true
	// token 2 fenced true
	// token 3 fenced true
}

// quiet keeps the examples' nodes and lockers from logging: a new node's
// warning that it does not vote yet is no part of what they show.
var quiet = slog.New(slog.DiscardHandler)

// startNode starts one redis-server node on a free loopback port (an
// in-process one where redis-server is missing); the caller stops it.
func startNode() *localredis.Cluster {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := localredis.Start(ctx, 1, localredis.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	return node
}

// startLocker is the named variant over a node of its own; stop closes the
// lockers and stops the node.
func startLocker(variant string, opts lock.Options) (locker *lock.Locker, stop func()) {
	node := startNode()
	opts.Logger = quiet
	lockers, err := lock.New([]*redis.Options{{Addr: node.Addrs()[0]}}, opts)
	if err == nil {
		locker, err = lockers.Locker(variant)
	}
	if err != nil {
		_ = node.Stop()
		log.Fatal(err)
	}
	return locker, func() {
		_ = lockers.Close()
		_ = node.Stop()
	}
}
