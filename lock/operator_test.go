package lock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// Contention across app instances is contention across processes: the
// second holder in these tests is this test binary run again as a helper,
// with its own connections to the nodes, met before the operator acts.
const helperEnv = "FLASHSALE_LOCK_SECOND_PROCESS"

// otherProcess is a second process on the env's nodes and namespace whose
// vote connections have met every node.
type otherProcess struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startOther starts the second process and returns once its connections
// are open and met (it took and released a lock of its own).
func (e *env) startOther(ttl time.Duration) *otherProcess {
	e.t.Helper()
	var addrs []string
	for _, o := range e.nodes {
		addrs = append(addrs, o.Addr)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join([]string{strings.Join(addrs, ","), e.ns, ttl.String()}, ";"))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	p := &otherProcess{cmd: cmd, in: in, out: bufio.NewReader(out)}
	if line := p.line(e.t); line != "ready" {
		e.t.Fatalf("second process: %q", line)
	}
	return p
}

func (p *otherProcess) line(t testing.TB) string {
	t.Helper()
	s, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("second process: %v", err)
	}
	return strings.TrimSpace(s)
}

// tryUntil has the second process try key every few milliseconds until
// deadline; it reports when it was granted (the zero time if never) and how
// many tries it made. A try that began before deadline may be granted just
// after it: the time says which side of the deadline the grant fell on.
func (p *otherProcess) tryUntil(t testing.TB, key string, deadline time.Time) (time.Time, int) {
	t.Helper()
	if _, err := fmt.Fprintf(p.in, "%s %d\n", key, deadline.UnixNano()); err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(p.line(t))
	if len(f) != 3 {
		t.Fatalf("the second process answered %q", f)
	}
	ns, _ := strconv.ParseInt(f[1], 10, 64)
	tries, _ := strconv.Atoi(f[2])
	if f[0] == "granted" {
		return time.Unix(0, ns), tries
	}
	return time.Time{}, tries
}

// neverGrantedWhile fails t if the second process is granted key before the
// held lease's validity ends, or if it made too few tries inside it for the
// test to prove anything.
func (p *otherProcess) neverGrantedWhile(t testing.TB, key string, held *lock.Lease) {
	t.Helper()
	at, tries := p.tryUntil(t, key, held.ValidUntil())
	if !at.IsZero() && at.Before(held.ValidUntil()) {
		t.Fatalf("the second process was granted %s %v before the first lease ran out", key, held.ValidUntil().Sub(at).Round(time.Millisecond))
	}
	if tries < 3 {
		t.Fatalf("only %d tries inside the first lease: the test proves nothing", tries)
	}
}

// secondProcess is the helper's side of otherProcess: it meets every node,
// says ready, then answers each "<key> <deadline ns>" line with "granted
// <ns> <tries>" or "none 0 <tries>"; the time is taken once the grant's
// answer is in, so it is never earlier than the grant.
func secondProcess(spec string) int {
	parts := strings.Split(spec, ";")
	ttl, err := time.ParseDuration(parts[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var nodes []*redis.Options
	for _, a := range strings.Split(parts[0], ",") {
		nodes = append(nodes, &redis.Options{Addr: a})
	}
	ls, err := lock.New(nodes, ladder.With(lock.Options{Namespace: parts[1], TTL: ttl, NodeTimeout: 100 * time.Millisecond}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ls.Close()
	l, err := ls.Locker(lock.Redlock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	for {
		warm, err := l.TryAcquire(ctx, "warm")
		if err == nil {
			_ = warm.Release(ctx)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		key, n, _ := strings.Cut(in.Text(), " ")
		ns, _ := strconv.ParseInt(n, 10, 64)
		deadline, tries, granted := time.Unix(0, ns), 0, time.Time{}
		for time.Now().Before(deadline) {
			tries++
			if lease, err := l.TryAcquire(ctx, key); err == nil {
				granted = time.Now()
				_ = lease.Release(ctx)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !granted.IsZero() {
			fmt.Println("granted", granted.UnixNano(), tries)
		} else {
			fmt.Println("none 0", tries)
		}
	}
	return 0
}

// evict switches eviction on at node i (volatile-ttl, a memory limit just
// above what it uses) and writes long-lived keys until key is gone from it.
func (e *env) evict(i int, key string) {
	e.t.Helper()
	ctx := context.Background()
	rdb := e.raw[i]
	used, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	var mem int64
	for _, row := range strings.Split(used, "\n") {
		if v, ok := strings.CutPrefix(row, "used_memory:"); ok {
			mem, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	for _, kv := range [][2]string{{"maxmemory", strconv.FormatInt(mem+2<<20, 10)}, {"maxmemory-policy", "volatile-ttl"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			e.t.Fatal(err)
		}
	}
	fill := strings.Repeat("x", 16<<10)
	for n := 0; e.pttl(i, key) != -2; n++ {
		if n > 4000 {
			e.t.Fatalf("%s never evicted from node %d", key, i)
		}
		if err := rdb.Set(ctx, fmt.Sprintf("fill:%d", n), fill, time.Hour).Err(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// endEviction puts node i back to noeviction and removes the filler.
func (e *env) endEviction(i int) {
	e.t.Helper()
	ctx := context.Background()
	rdb := e.raw[i]
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "0"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			e.t.Fatal(err)
		}
	}
	iter := rdb.Scan(ctx, 0, "fill:*", 1000).Iterator()
	for iter.Next(ctx) {
		_ = rdb.Del(ctx, iter.Val()).Err()
	}
}

// An operator switches eviction on at node 2 (CONFIG SET maxmemory-policy
// volatile-ttl and a memory limit) while another process's vote connections
// to it are open and met, and memory pressure evicts the key that a lease
// on a bare quorum (nodes 0–2) holds there. The other process must not be
// granted the lock while the lease is valid: its connections met the node
// under noeviction, and no connection breaks.
func TestEvictionUnderOpenConnections(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	c := testsupport.Redis(t, 5, localredis.Options{})
	const ttl = 2 * time.Second
	first := newEnv(t, c, lock.Options{TTL: ttl})
	first.aged(c)
	second := first.startOther(ttl)
	held := first.bareQuorum("k", 3, 4) // nodes 0–2
	first.evict(2, "k")
	second.neverGrantedWhile(t, "k", held)
}

// Every operator action on a live node that can remove, roll back or hide
// lock keys, or take away what the lock reads there, run at node 2 while a
// lease holds a bare quorum (nodes 0–2) and another process's connections
// are open and met: neither process is granted the lock inside the
// lease's validity, and the node votes again by itself once the action is
// over. One cluster for all, one after another; the recovery time of each
// is logged (docs/design.md quotes it).
func TestOperatorActionsGrantNoLockTwice(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	opts := localredis.Options{AOF: true, AppendFsync: "always", Args: []string{"--enable-debug-command", "yes"}}
	c := testsupport.Redis(t, 5, opts)
	spare := testsupport.Redis(t, 1, opts).Nodes[0] // a server outside the set, to replicate with
	// Long enough for the slowest action (a FAILOVER, under a second)
	// to leave the second process time to try inside the lease.
	const ttl = 2 * time.Second
	first := newEnv(t, c, lock.Options{TTL: ttl})
	first.aged(c)
	second := first.startOther(ttl)
	ctx := context.Background()
	node2 := first.raw[2]
	spareAt := redis.NewClient(&redis.Options{Addr: spare.Addr()})
	t.Cleanup(func() { _ = spareAt.Close() })
	on := func(rdb *redis.Client, args ...any) func(t *testing.T) {
		return func(t *testing.T) {
			if err := rdb.Do(ctx, args...).Err(); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
		}
	}
	do := func(args ...any) func(t *testing.T) { return on(node2, args...) }
	host, port, _ := strings.Cut(spare.Addr(), ":")
	host2, port2, _ := strings.Cut(first.nodes[2].Addr, ":")
	replica := func(t *testing.T) {
		on(spareAt, "REPLICAOF", host2, port2)(t)
		waitInfo(t, spareAt, "replication", "master_link_status:up")
	}
	failover := func(t *testing.T) {
		do("FAILOVER")(t)
		waitInfo(t, node2, "replication", "role:slave")
	}
	promote := func(t *testing.T) {
		do("REPLICAOF", "NO", "ONE")(t)
		on(spareAt, "REPLICAOF", "NO", "ONE")(t)
	}
	for _, tc := range []struct {
		name               string
		act, after, before func(t *testing.T)
	}{
		{"FLUSHALL", do("FLUSHALL"), nil, nil},
		{"FLUSHALL ASYNC", do("FLUSHALL", "ASYNC"), nil, nil},
		{"FLUSHDB", do("FLUSHDB"), nil, nil},
		{"FLUSHDB ASYNC", do("FLUSHDB", "ASYNC"), nil, nil},
		{"SWAPDB", do("SWAPDB", "0", "1"), do("SWAPDB", "0", "1"), nil},
		{"DEBUG RELOAD NOSAVE", do("DEBUG", "RELOAD", "NOSAVE"), nil, nil},
		{"eviction switched on", func(t *testing.T) { first.evict(2, "k") }, func(t *testing.T) { first.endEviction(2) }, nil},
		{"SCRIPT FLUSH", do("SCRIPT", "FLUSH"), nil, nil},
		{"ACL SETUSER takes INFO away", do("ACL", "SETUSER", "default", "-info"), do("ACL", "SETUSER", "default", "+info"), nil},
		{"notifications off", do("CONFIG", "SET", "notify-keyspace-events", ""), do("CONFIG", "SET", "notify-keyspace-events", "Kgx"), nil},
		{"CLIENT KILL of every client", do("CLIENT", "KILL", "TYPE", "normal"), nil, nil},
		{"DEBUG LOADAOF", do("DEBUG", "LOADAOF"), nil, nil},
		{"REPLICAOF host port (a full resync)", do("REPLICAOF", host, port), promote, nil},
		{"FAILOVER", failover, promote, replica},
		{"a restart without its data", func(t *testing.T) {
			if err := c.Nodes[2].Restart(ctx, false); err != nil {
				t.Fatal(err)
			}
		}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An action that outlasts the lease (a FAILOVER on a busy
			// machine) has tested nothing: it runs again, a few times at most.
			for attempt := 1; ; attempt++ {
				if actWhileHeld(t, c, first, second, node2, tc.before, tc.act, tc.after) {
					return
				}
				if attempt == 3 {
					t.Fatalf("%s outlasted the lease's validity %d times: nothing was tested", tc.name, attempt)
				}
			}
		})
	}
}

// actWhileHeld runs act at node 2 while first holds a lease on a bare quorum
// (nodes 0–2), checks that second is never granted the key inside the
// lease's validity, and logs when node 2 votes again. before and after (if
// set) prepare and undo the action. It reports false, having checked
// nothing, when act left too little of the validity for second's tries.
func actWhileHeld(t *testing.T, c *localredis.Cluster, first *env, second *otherProcess, node2 *redis.Client, before, act, after func(t *testing.T)) bool {
	ctx := context.Background()
	// An older copy of the data for DEBUG RELOAD NOSAVE to load.
	if err := node2.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(t)
	}
	first.aged(c)
	held := first.bareQuorum("k", 3, 4) // nodes 0–2
	undo := sync.OnceFunc(func() {
		if after != nil {
			after(t)
		}
	})
	defer undo() // the next action needs the node as it was
	act(t)
	ended := time.Now()
	tested := time.Until(held.ValidUntil()) > 150*time.Millisecond
	if tested {
		second.neverGrantedWhile(t, "k", held)
	} else {
		t.Logf("the action ended %v before the lease's validity did: again", time.Until(held.ValidUntil()).Round(time.Millisecond))
	}
	if after != nil {
		undo()
		ended = time.Now()
	}
	_ = held.Release(ctx)
	t.Logf("%s: node 2 votes again %v after the action ended", t.Name(), first.needsNode2("r", 10*time.Second).Sub(ended).Round(10*time.Millisecond))
	return tested
}

// needsNode2 returns when a Redlock acquire of key is granted while nodes 3
// and 4 hold it for someone else: a quorum that needs node 2's vote.
func (e *env) needsNode2(key string, within time.Duration) time.Time {
	e.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for {
		for _, j := range []int{3, 4} {
			if err := e.raw[j].Set(ctx, e.ns+"lock:"+key, "other", 300*time.Millisecond).Err(); err != nil {
				e.t.Fatal(err)
			}
		}
		if lease, err := e.locker(lock.Redlock).TryAcquire(ctx, key); err == nil {
			at := time.Now()
			_ = lease.Release(ctx)
			return at
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("node 2 does not vote %v after the action", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitInfo waits until rdb's INFO section holds want.
func waitInfo(t *testing.T, rdb *redis.Client, section, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if info, _ := rdb.Info(context.Background(), section).Result(); strings.Contains(info, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("INFO %s never showed %s", section, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
