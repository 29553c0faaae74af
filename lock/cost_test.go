package lock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// What one acquire+release costs the nodes, read from each node's own
// count of its commands (INFO commandstats: calls and microseconds per
// command), diffed around many pairs on fresh nodes. The counts are the
// protocol and do not depend on the machine: TestCommandsPerPair holds
// them. The microseconds are the nodes' CPU and do: BenchmarkCommandCost
// reports them, beside redsync's on the same nodes.

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	Calls int64
	Usec  int64
}

// commandStats reads a node's INFO commandstats, by command name.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]cmdStat, error) {
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]cmdStat{}
	for _, row := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(row), "cmdstat_"), ":")
		if !ok || strings.HasPrefix(row, "#") {
			continue
		}
		var st cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[name] = st
	}
	return out, nil
}

// nodeCost is what the pairs cost one node: calls and microseconds per
// pair, by command.
type nodeCost struct {
	Calls map[string]float64 `json:"calls_per_pair"`
	Usec  map[string]float64 `json:"usec_per_pair"`
}

// total is every command of c: calls and microseconds per pair.
func (c nodeCost) total() (calls, usec float64) {
	for k, v := range c.Calls {
		calls += v
		usec += c.Usec[k]
	}
	return calls, usec
}

// costOf runs n pairs of p on key, one after another, and returns what
// they cost each node (rdbs, first node first): the difference of the
// nodes' command counts read before and after, less the reading itself.
func costOf(tb testing.TB, rdbs []*redis.Client, p pair, key string, n int) []nodeCost {
	tb.Helper()
	ctx := context.Background()
	read := func() []map[string]cmdStat {
		out := make([]map[string]cmdStat, len(rdbs))
		for i, rdb := range rdbs {
			st, err := commandStats(ctx, rdb)
			if err != nil {
				tb.Fatalf("node %d: %v", i, err)
			}
			out[i] = st
		}
		return out
	}
	for range 20 { // connections opened and met, scripts loaded
		unlock, err := p(ctx, key)
		if err != nil {
			tb.Fatal(err)
		}
		unlock()
	}
	before := read()
	for range n {
		unlock, err := p(ctx, key)
		if err != nil {
			tb.Fatal(err)
		}
		unlock()
	}
	after := read()
	out := make([]nodeCost, len(rdbs))
	for i := range rdbs {
		c := nodeCost{Calls: map[string]float64{}, Usec: map[string]float64{}}
		for name, a := range after[i] {
			b := before[i][name]
			calls, usec := a.Calls-b.Calls, a.Usec-b.Usec
			if name == "info" && calls > 0 {
				// The first reading is counted in the second: one call
				// of average cost.
				usec -= usec / calls
				calls--
			}
			if calls == 0 {
				continue
			}
			c.Calls[name] = float64(calls) / float64(n)
			c.Usec[name] = float64(usec) / float64(n)
		}
		out[i] = c
	}
	return out
}

// costNodes starts five fresh nodes for a cost reading, with a raw client
// to each and redsync over them as its users make it.
func costNodes(tb testing.TB, opts ...lock.Option) (*env, []*redis.Client, *redsync.Redsync) {
	tb.Helper()
	c := testsupport.Redis(tb, 5)
	e := newEnv(tb, c, opts...)
	e.voting()
	var pools []rsredis.Pool
	for _, o := range testsupport.Options(tb, c) {
		cl := redis.NewClient(o)
		tb.Cleanup(func() { _ = cl.Close() })
		pools = append(pools, rsgoredis.NewPool(cl))
	}
	return e, e.raw, redsync.New(pools...)
}

// TestCommandsPerPair holds the commands each node runs for one
// acquire+release of the Redlock rungs, uncontended, with the speed layer
// on and off, and redsync's beside them: the protocol's cost, so that a
// command added to every vote shows here.
func TestCommandsPerPair(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own nodes")
	}
	// What each node runs, a script's own commands included (INFO
	// commandstats counts them under their names): redlock's vote is SET
	// NX PX, then restart awareness's check (GET of the data-age marker,
	// INFO commandstats for the operator ledger); its release is the
	// compare-and-delete script (EVAL, then GET and DEL inside).
	redlockWant := map[string]float64{"set": 1, "get": 2, "info": 1, "eval": 1, "del": 1}
	// redlock+fence's vote is the script that sets the key and draws the
	// token (EVAL: SET, INCR), then the same check; its release is
	// redlock's. The write-back goes only to the nodes of the quorum whose
	// counter was behind: uncontended, none (the counters move together).
	fenceWant := map[string]float64{"eval": 2, "set": 1, "incr": 1, "get": 2, "info": 1, "del": 1}
	cases := []struct {
		name string
		fast bool
		want map[string]float64 // on every node
	}{
		{name: lock.Redlock, fast: false, want: redlockWant},
		{name: lock.Redlock, fast: true, want: redlockWant},
		{name: lock.RedlockFence, fast: false, want: fenceWant},
		{name: lock.RedlockFence, fast: true, want: fenceWant},
		// redsync: SET NX PX, and its delete script by hash (EVALSHA: GET, DEL).
		{name: "redsync", want: map[string]float64{"set": 1, "evalsha": 1, "get": 1, "del": 1}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/fast=%v", tc.name, tc.fast), func(t *testing.T) {
			e, rdbs, rs := costNodes(t, lock.WithFast(tc.fast))
			p := redsyncPair(rs)
			if tc.name != "redsync" {
				p = variantPair(e.locker(tc.name))
			}
			costs := costOf(t, rdbs, p, "cost", 50)
			for i, c := range costs {
				// Whole commands per pair: a stray command of the
				// connections' own (a ping, a meeting) rounds away.
				maps.DeleteFunc(c.Calls, func(_ string, n float64) bool { return math.Round(n) == 0 })
				for name, n := range c.Calls {
					c.Calls[name] = math.Round(n)
				}
				if !maps.Equal(c.Calls, tc.want) {
					t.Errorf("node %d runs %v per pair, want %v", i, c.Calls, tc.want)
				}
			}
		})
	}
}

// BenchmarkCommandCost reports what one acquire+release costs each node,
// uncontended: the commands it runs and the microseconds of node CPU they
// take (the mean over the five nodes), for the Redlock rungs and redsync on
// the same fresh nodes, and logs each node's reading as JSON. The
// microseconds are CPU of processes that share the machine: compare them
// within one run.
//
//	go test -run '^$' -bench CommandCost -benchtime 2000x -v ./lock/
func BenchmarkCommandCost(b *testing.B) {
	e, rdbs, rs := costNodes(b)
	cases := []struct {
		name string
		p    pair
	}{
		{lock.Lua, variantPair(e.locker(lock.Lua))},
		{lock.Redlock, variantPair(e.locker(lock.Redlock))},
		{lock.RedlockFence, variantPair(e.locker(lock.RedlockFence))},
		{"ref=redsync-5", redsyncPair(rs)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			n := max(b.N, 1)
			b.ResetTimer()
			costs := costOf(b, rdbs, tc.p, "cost:"+tc.name, n)
			b.StopTimer()
			var calls, usec float64
			for _, c := range costs {
				cc, cu := c.total()
				calls, usec = calls+cc, usec+cu
			}
			b.ReportMetric(calls/float64(len(costs)), "cmds/node/pair")
			b.ReportMetric(usec/float64(len(costs)), "node-µs/node/pair")
			b.ReportMetric(usec, "node-µs/pair")
			js, err := json.Marshal(struct {
				Variant string     `json:"variant"`
				Pairs   int        `json:"pairs"`
				Nodes   []nodeCost `json:"nodes"`
			}{tc.name, n, costs})
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%s", js)
		})
	}
}
