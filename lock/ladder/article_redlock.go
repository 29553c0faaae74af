package ladder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/fault"
	"flashsale/lock"
)

// ArticleRedlock is the name of the Redlock an article teaches.
const ArticleRedlock = "article-redlock"

// articleRedlock is the Redlock of a widely read "production" article on
// Redis locks, its Python class translated step by step and nothing else
// changed: a quorum fixed at 2 whatever the number of nodes, SET NX sent to
// the nodes one after another, the time taken read from the wall clock and
// compared with the whole TTL, the caller told only yes or no (no
// validity), and a release that is a bare DEL on the nodes it acquired.
// Each flaw is marked BROKEN where it happens; redlock is the algorithm
// it means to be.
//
// Where it breaks: with five nodes two clients can each win two, so two
// holders need no fault at all (clean). A try that misses the quorum leaves
// its keys behind until they expire, taking votes from everyone else. The
// bare DEL frees a successor's key once a holder outlives its TTL.
type articleRedlock struct {
	nodes []*redis.Client
	// BROKEN: the article's default, quorum=2, not N/2+1: with five nodes
	// two disjoint pairs are both "a quorum".
	quorum int

	// won is, by owner value, the nodes each held lease's acquire won: the
	// article's acquire returns them and its release takes them back.
	mu  sync.Mutex
	won map[string][]*redis.Client
}

func newArticleRedlock(nodes []*redis.Client) *articleRedlock {
	return &articleRedlock{nodes: nodes, quorum: 2, won: map[string][]*redis.Client{}}
}

func (a *articleRedlock) Acquire(ctx context.Context, checkpoint step, key, value string, ttl time.Duration) (time.Duration, error) {
	start := time.Now().Round(0) // start_time = time.time(): BROKEN: the wall clock, which can step
	var acquired []*redis.Client
	var failed []error
	// "向所有节点发送获取锁请求" ("send the request to every node"): one
	// after another, each waiting for the one before, with no per-node
	// timeout but the client's.
	for _, n := range a.nodes {
		err := n.Do(ctx, "set", key, value, "nx", "px", ms(ttl)).Err() // SET k v NX EX ttl (as PX: a TTL under a second)
		if err != nil {
			if !errors.Is(err, redis.Nil) {
				failed = append(failed, down(n, err)) // except Exception: continue
			}
			continue
		}
		acquired = append(acquired, n)
	}
	if err := checkpoint(ctx, fault.AfterAcquireStep1); err != nil {
		return 0, err
	}
	elapsed := time.Now().Round(0).Sub(start) // BROKEN: wall clock again; no drift allowance
	if len(acquired) >= a.quorum {
		if elapsed < ttl { // BROKEN: against the whole TTL, and the caller is not told what is left
			a.mu.Lock()
			a.won[value] = acquired
			a.mu.Unlock()
			return ttl, nil
		}
		a.del(ctx, acquired, key) // "if it took too long, release every lock acquired"
	}
	// BROKEN: a missed quorum undoes nothing: the keys it set stay until
	// they expire, and vote against every other client meanwhile.
	if len(failed) > len(a.nodes)-a.quorum {
		return 0, fmt.Errorf("%d of %d nodes failed: %w", len(failed), len(a.nodes), errors.Join(failed...))
	}
	return 0, lock.ErrNotAcquired
}

// release is the article's: DEL on each node the acquire won.
func (a *articleRedlock) Release(ctx context.Context, _ step, key, value string) error {
	a.mu.Lock()
	nodes := a.won[value]
	delete(a.won, value)
	a.mu.Unlock()
	a.del(ctx, nodes, key)
	return nil
}

// del is the article's release loop.
func (a *articleRedlock) del(ctx context.Context, nodes []*redis.Client, key string) {
	for _, n := range nodes {
		_ = n.Del(ctx, key).Err() // BROKEN: DEL k, whoever holds it now; except Exception: continue
	}
}

// extend: the article's Redlock has none. Its renewal thread, shown for a
// single node, sends a bare EXPIRE; here that, on the nodes the acquire
// won, held while the quorum of 2 renewed.
func (a *articleRedlock) Extend(ctx context.Context, key, value string, ttl time.Duration) (time.Duration, error) {
	a.mu.Lock()
	nodes := a.won[value]
	a.mu.Unlock()
	renewed := 0
	for _, n := range nodes {
		if _, err := plainExtend(ctx, n, key, ttl); err == nil { // BROKEN: EXPIRE k ttl, whoever holds it
			renewed++
		}
	}
	if renewed < a.quorum {
		return 0, lock.ErrNotHeld
	}
	return ttl, nil
}
