package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"flashsale/internal/clock"

	"github.com/redis/go-redis/v9"
)

// networked is a Nodes whose instances reach the nodes through a Network
// the runner controls (the nodes of a local environment).
type networked interface {
	Network() *Network
}

func networkOf(n Nodes) (*Network, error) {
	if nw, ok := n.(networked); ok && nw.Network() != nil {
		return nw.Network(), nil
	}
	return nil, errors.New("the recipe needs the network between the instances and the nodes, which only a local environment has")
}

// majority is nodes 0..n/2: a quorum, with node 0 (the single-node
// variants' node) in it.
func majority(n int) []int { return All(n/2 + 1) }

// ClockJumpRecipe makes the clocks of a majority of the nodes jump ahead
// by twice the TTL every half TTL, from 10% to 90% of the run: each jump
// expires every lease being used there, under its holder.
func ClockJumpRecipe(ttl time.Duration) *NodeRecipe {
	jump, every := 2*ttl, ttl/2
	return &NodeRecipe{
		Steps: fmt.Sprintf("from 10%% to 90%% of the run, every %v: the clocks of nodes 0..n/2 jump %v ahead (each lock key's TTL there shortened by %v)",
			every, jump, jump),
		MinNodes: 3,
		run: func(ctx context.Context, st stage) error {
			if !clock.Sleep(ctx, st.d/10) {
				return nil
			}
			nodes := majority(st.nodes.Len())
			var urls []string
			for _, i := range nodes {
				urls = append(urls, st.nodes.URL(i))
			}
			end := time.Now().Add(st.d * 8 / 10)
			jumps, moved := 0, 0
			var errs []error
			for time.Now().Before(end) && clock.Sleep(ctx, every) {
				n, err := JumpClocks(ctx, urls, st.pattern, jump)
				jumps, moved = jumps+1, moved+n
				if err != nil && len(errs) < 3 {
					errs = append(errs, err)
				}
			}
			st.note(fmt.Sprintf("%d clock jumps of %v on nodes %s cut %d leases short", jumps, jump, Indexes(nodes), moved))
			return errors.Join(errs...)
		},
	}
}

// DelayRecipe delays every reply from the nodes to instance 0 by d, from
// the start to 90% of the run: from the start, so that the scarce SKU's
// queue of waiters is there when instance 0's late grants arrive (once it
// is sold out, nobody queues for its lock).
func DelayRecipe(d time.Duration) *NodeRecipe {
	return &NodeRecipe{
		Steps:    fmt.Sprintf("from the start to 90%% of the run, every reply from the nodes to app instance 0 is %v late", d),
		MinNodes: 1,
		run: func(ctx context.Context, st stage) error {
			return netFault(ctx, st, 0, func(nw *Network) error { return nw.Delay(0, All(st.nodes.Len()), d, 0) },
				fmt.Sprintf("replies from every node to app instance 0 delayed %v", d))
		},
	}
}

// PartitionRecipe cuts instance 0 off the last two nodes and instance 1
// off the first two, from 10% to 90% of the run.
func PartitionRecipe() *NodeRecipe {
	return &NodeRecipe{
		Steps:    "from 10% to 90% of the run, app instance 0 is cut off nodes n−2 and n−1, instance 1 off nodes 0 and 1 (both ways)",
		MinNodes: 5,
		run: func(ctx context.Context, st stage) error {
			n := st.nodes.Len()
			return netFault(ctx, st, st.d/10, func(nw *Network) error {
				return errors.Join(nw.Cut(0, []int{n - 2, n - 1}), nw.Cut(1, []int{0, 1}))
			}, fmt.Sprintf("app instance 0 reaches nodes 0–%d, app instance 1 nodes 2–%d", n-3, n-1))
		},
	}
}

// netFault puts a network fault in place from `from` into the run until
// 90% of it, and heals it, whatever happens, before it returns.
func netFault(ctx context.Context, st stage, from time.Duration, apply func(*Network) error, what string) error {
	nw, err := networkOf(st.nodes)
	if err != nil {
		return err
	}
	if !clock.Sleep(ctx, from) {
		return nil
	}
	err = apply(nw)
	st.note(what)
	defer func() { st.note("network healed") }()
	defer nw.Heal(context.WithoutCancel(ctx)) //nolint:errcheck // a heal that fails leaves toxics Heal removes next time
	if err != nil {
		return err
	}
	clock.Sleep(ctx, st.d*9/10-from)
	return nil
}

// shorten moves every lock key's expiry closer by ARGV[1] ms, as a clock
// that leapt forward would; a key with less left expires at once. A key
// without a TTL is left alone: the jump does not give it one.
var shorten = redis.NewScript(`
local n = 0
for _, k in ipairs(KEYS) do
  local t = redis.call('PTTL', k)
  if t > 0 then
    redis.call('PEXPIRE', k, math.max(1, t - tonumber(ARGV[1])))
    n = n + 1
  end
end
return n`)

// JumpClocks simulates a clock that leaps forward by `by` on each node at
// urls (reached directly, not through the instances' proxies): Debian's
// libfaketime does not work with Debian's redis-server, so the effect is
// made on the node, by shortening the TTL of every key matching pattern.
// It reports how many keys it moved.
func JumpClocks(ctx context.Context, urls []string, pattern string, by time.Duration) (int, error) {
	var mu sync.Mutex
	total := 0
	err := each(All(len(urls)), func(i int) error {
		o, err := redis.ParseURL(urls[i])
		if err != nil {
			return err
		}
		o.MaxRetries = -1
		rdb := redis.NewClient(o)
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(keys) == 0 {
			return err
		}
		moved, err := shorten.Run(ctx, rdb, keys, by.Milliseconds()).Int()
		mu.Lock()
		total += moved
		mu.Unlock()
		return err
	})
	return total, err
}

// All is every node index of n nodes.
func All(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
