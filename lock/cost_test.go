//go:build unix

package lock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"flashsale/internal/redisinfo"
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

// cpuSeconds is the CPU a node has used (INFO cpu: user and system).
func cpuSeconds(ctx context.Context, rdb *redis.Client) (float64, error) {
	s, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	return redisinfo.CPUSeconds(s)
}

// selfCPU is the CPU this process has used: the client's side of the
// pairs, and whatever else runs in it meanwhile.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nodeCost is what the pairs cost one node: calls and microseconds per
// pair, by command.
type nodeCost struct {
	Calls map[string]float64 `json:"calls_per_pair"`
	Usec  map[string]float64 `json:"usec_per_pair"`
	// CPU is the node process's CPU per pair in µs, its event loop and
	// system calls included, which commandstats does not count.
	CPU float64 `json:"cpu_usec_per_pair"`
}

// total is every command of c: calls and microseconds per pair. A
// script's own commands count as commands, and their time in the
// script's too.
func (c nodeCost) total() (calls, usec float64) {
	for k, v := range c.Calls {
		calls += v
		usec += c.Usec[k]
	}
	return calls, usec
}

// costOf runs n pairs of p, par clients at once each on its own key, and
// returns what they cost each node (rdbs, first node first): the
// difference of the nodes' command counts read before and after, less the
// reading itself.
func costOf(tb testing.TB, rdbs []*redis.Client, p pair, key string, n, par int) []nodeCost {
	tb.Helper()
	ctx := context.Background()
	read := func() ([]map[string]cmdStat, []float64) {
		out, cpu := make([]map[string]cmdStat, len(rdbs)), make([]float64, len(rdbs))
		for i, rdb := range rdbs {
			st, err := commandStats(ctx, rdb)
			if err != nil {
				tb.Fatalf("node %d: %v", i, err)
			}
			if cpu[i], err = cpuSeconds(ctx, rdb); err != nil {
				tb.Fatalf("node %d: %v", i, err)
			}
			out[i] = st
		}
		return out, cpu
	}
	for range 20 { // connections opened and met, scripts loaded
		unlock, err := p(ctx, key)
		if err != nil {
			tb.Fatal(err)
		}
		unlock()
	}
	before, cpu0 := read()
	var wg sync.WaitGroup
	for c := range par {
		wg.Go(func() {
			for range n/par + min(1, max(0, n%par-c)) {
				unlock, err := p(ctx, fmt.Sprintf("%s:%d", key, c))
				if err != nil {
					tb.Error(err)
					return
				}
				unlock()
			}
		})
	}
	wg.Wait()
	after, cpu1 := read()
	out := make([]nodeCost, len(rdbs))
	for i := range rdbs {
		c := nodeCost{Calls: map[string]float64{}, Usec: map[string]float64{}, CPU: (cpu1[i] - cpu0[i]) * 1e6 / float64(n)}
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
func costNodes(tb testing.TB, opts ...lock.Options) (*env, []*redis.Client, *redsync.Redsync) {
	tb.Helper()
	c := testsupport.Redis(tb, 5)
	e := newEnv(tb, c, opts...)
	e.voting()
	return e, e.raw, redsyncOn(tb, testsupport.Options(tb, c))
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
			e, rdbs, rs := costNodes(t, lock.Options{FastOff: !tc.fast})
			p := redsyncPair(rs)
			if tc.name != "redsync" {
				p = variantPair(e.locker(tc.name))
			}
			costs := costOf(t, rdbs, p, "cost", 50, 1)
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
		{"ref=bare-5", barePair(rdbs)},
	}
	for _, par := range []int{1, 16} {
		for _, tc := range cases {
			b.Run(fmt.Sprintf("par=%d/%s", par, tc.name), func(b *testing.B) { commandCost(b, rdbs, tc.name, tc.p, par) })
		}
	}
}

// commandCost is one case of BenchmarkCommandCost: b.N pairs of p, par at
// once.
func commandCost(b *testing.B, rdbs []*redis.Client, name string, p pair, par int) {
	n := max(b.N, 1)
	self := selfCPU()
	costs := costOf(b, rdbs, p, "cost:"+name, n, par)
	// The warm-up's pairs ran in this process too.
	client := float64((selfCPU() - self).Microseconds()) / float64(n+20)
	var calls, usec, cpu float64
	for _, c := range costs {
		cc, cu := c.total()
		calls, usec, cpu = calls+cc, usec+cu, cpu+c.CPU
	}
	per := float64(len(costs))
	b.ReportMetric(calls/per, "cmds/node/pair")
	b.ReportMetric(usec/per, "cmdstat-µs/node/pair")
	b.ReportMetric(cpu/per, "cpu-µs/node/pair")
	b.ReportMetric(client, "client-cpu-µs/pair")
	js, err := json.Marshal(struct {
		Variant  string     `json:"variant"`
		Parallel int        `json:"parallel"`
		Pairs    int        `json:"pairs"`
		Client   float64    `json:"client_cpu_usec_per_pair"`
		Nodes    []nodeCost `json:"nodes"`
	}{name, par, n, client, costs})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s", js)
}
