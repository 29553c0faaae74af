package lock_test

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/locktap"
	"flashsale/internal/taptest"
	"flashsale/internal/testsupport"
	"flashsale/lock"
)

// readGate freezes the reading side of this process's connections to the
// nodes, not the nodes: while it is shut, a connection's Read waits, so the
// nodes' answers pile up unread in the socket buffers, as they do when the
// process is too busy to read them. A Read already waiting on the socket
// is cut into short waits, so shutting the gate stops every reader within
// one of them; parked counts the readers stopped at the gate. A caller's
// read deadline still holds, as it would for a busy process.
type readGate struct {
	mu     sync.Mutex
	open   chan struct{} // closed while the gate is open
	parked int
	change chan struct{} // closed and replaced when parked changes
}

func newReadGate() *readGate {
	g := &readGate{open: make(chan struct{}), change: make(chan struct{})}
	close(g.open)
	return g
}

func (g *readGate) set(shut bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		if shut {
			g.open = make(chan struct{})
		}
	default:
		if !shut {
			close(g.open)
		}
	}
}

func (g *readGate) park(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parked += d
	close(g.change)
	g.change = make(chan struct{})
}

// waitParked waits until n readers are stopped at the gate.
func (g *readGate) waitParked(ctx context.Context, n int) error {
	for {
		g.mu.Lock()
		parked, change := g.parked, g.change
		g.mu.Unlock()
		if parked >= n {
			return nil
		}
		select {
		case <-change:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pass waits for the gate to open, or for the deadline.
func (g *readGate) pass(deadline time.Time) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return nil
	default:
	}
	g.park(1)
	defer g.park(-1)
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-open:
		return nil
	case <-expired:
		return os.ErrDeadlineExceeded
	}
}

// gatedConn is a real connection whose reads pass the gate first.
type gatedConn struct {
	net.Conn
	g        *readGate
	deadline *atomic.Int64 // the caller's read deadline, unix ns; 0 for none
}

func (c gatedConn) SetDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c gatedConn) SetReadDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c gatedConn) setDeadline(t time.Time) {
	if t.IsZero() {
		c.deadline.Store(0)
		return
	}
	c.deadline.Store(t.UnixNano())
}

func (c gatedConn) Read(b []byte) (int, error) {
	for {
		var dl time.Time
		if ns := c.deadline.Load(); ns != 0 {
			dl = time.Unix(0, ns)
		}
		if err := c.g.pass(dl); err != nil {
			return 0, err
		}
		short := time.Now().Add(5 * time.Millisecond)
		if !dl.IsZero() && dl.Before(short) {
			short = dl
		}
		_ = c.Conn.SetReadDeadline(short)
		n, err := c.Conn.Read(b)
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && (dl.IsZero() || time.Now().Before(dl)) {
			continue
		}
		return n, err
	}
}

// NetConn is the connection beneath, as crypto/tls offers it.
func (c gatedConn) NetConn() net.Conn { return c.Conn }

// TestLateReaderIsNotUnavailable: with every node up and answering but this
// process's readers frozen, Redlock votes miss their per-node timeout. That
// must read as busy (retry), never as Redis being unavailable, and the
// votes' connections must survive the freeze: once the readers run again
// the lock is granted. Nodes that really stop answering (paused) are still
// unavailable.
func TestLateReaderIsNotUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, g := gatedRedlock(ctx, t, "late", nil)
	g.set(true)
	if err := g.waitParked(ctx, len(shared(t).Addrs())); err != nil {
		t.Fatalf("the votes' readers did not stop at the gate: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 400*time.Millisecond)
	_, err := l.Acquire(wctx, "late")
	wcancel()
	switch {
	case err == nil:
		t.Fatal("granted while no answer could be read")
	case errors.Is(err, lock.ErrUnavailable):
		t.Fatalf("a process late to read live nodes' answers was told they are unavailable: %v", err)
	case !errors.Is(err, lock.ErrNotAcquired):
		t.Fatalf("want busy (ErrNotAcquired), got %v", err)
	}
	var qe *lock.QuorumError
	if errors.As(err, &qe) {
		for addr, nerr := range qe.Failed {
			if !errors.Is(nerr, lock.ErrNodeLate) {
				t.Errorf("node %s counted failed, not late: %v", addr, nerr)
			}
		}
	}
	g.set(false)
	lease, err := l.Acquire(ctx, "late")
	if err != nil {
		t.Fatalf("after the freeze: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFrozenNodesAreUnavailable: with the first node frozen and two more
// stopped, no quorum is possible, and concurrent lockers on one hot key are
// told so (ErrUnavailable), not busy, within their wait, with the speed
// layer on and off. TestLateReaderIsNotUnavailable above is the control: a
// process late to read live nodes' answers is still busy. A frozen node
// once read as late, not down, and a round decided by refusals before the
// failures came in, or a waiter that had no try of its own, said busy.
func TestFrozenNodesAreUnavailable(t *testing.T) {
	testsupport.Long(t, "nodes frozen, flushed or down for seconds")
	c := testsupport.Redis(t, 5, localredis.Options{})
	const lockers, rounds, wait = 4, 3, time.Second
	envs := map[bool]*env{}
	for _, fast := range []bool{true, false} {
		envs[fast] = newEnv(t, c, lock.Options{FastOff: !fast})
		envs[fast].aged(c)
	}
	if err := c.Nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Nodes[0].Resume() }) // before the cluster stops
	for _, i := range []int{1, 2} {
		if err := c.Nodes[i].Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for fast, e := range envs {
		got, errs, slowest := contend(e.locker(lock.Redlock), "hot", lockers, rounds, wait)
		if got > 0 {
			t.Fatalf("fast=%v: %d granted with three of five nodes down", fast, got)
		}
		for _, err := range errs {
			if !errors.Is(err, lock.ErrUnavailable) || isBusy(err) {
				t.Errorf("fast=%v: want ErrUnavailable, not busy: %v", fast, err)
			}
		}
		// The wait is the caller's; a second more is the machine's slack.
		if slowest > wait+time.Second {
			t.Errorf("fast=%v: an answer took %v, want about the %v wait", fast, slowest, wait)
		}
	}
}

// TestLateVoteCounts: a vote read after the per-node timeout, because this
// process was late to read it while the node had answered in time, still
// counts, so the try that sent it is granted. Given up on, every try of a
// saturated process failed though its nodes granted it, and three instances
// in a spike went seconds without a lease. The freeze (100 ms) is the
// fault: longer than the per-node timeout (50 ms), within the four timeouts
// a node that answers is waited for.
func TestLateVoteCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var tries atomic.Int64
	l, g := gatedRedlock(ctx, t, "late-vote", func(ev locktap.Event) {
		if ev.Kind == locktap.Acquired && ev.Key == "late-vote" {
			tries.Store(int64(ev.Tries))
		}
	})
	g.set(true)
	if err := g.waitParked(ctx, len(shared(t).Addrs())); err != nil {
		t.Fatalf("the votes' readers did not stop at the gate: %v", err)
	}
	began := time.Now()
	thaw := time.AfterFunc(100*time.Millisecond, func() { g.set(false) })
	defer thaw.Stop()
	lease, err := l.Acquire(ctx, "late-vote")
	if err != nil {
		t.Fatalf("acquire while the readers were frozen for 100ms: %v", err)
	}
	took := time.Since(began)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := tries.Load(); n != 1 && took < 150*time.Millisecond {
		// Within 150 ms this process was not starved beyond the freeze, so
		// the first try's votes were there to be read within its window.
		t.Errorf("granted at try %d after %v: the first try's votes, read late, were not counted", n, took)
	}
}

// gatedRedlock is a redlock locker (speed layer off, 50 ms per-node
// timeout) whose connections to the shared nodes read through a gate, with
// one lease of key taken and given back so that the votes' connections are
// open and their readers wait on the sockets.
func gatedRedlock(ctx context.Context, t *testing.T, key string, observe func(locktap.Event)) (*lock.Locker, *readGate) {
	t.Helper()
	g := newReadGate()
	nodes := testsupport.Options(t, shared(t))
	for i, o := range nodes {
		cp := *o
		cp.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return gatedConn{nc, g, new(atomic.Int64)}, nil
		}
		nodes[i] = &cp
	}
	opts := lock.Options{FastOff: true, NotificationsOff: true, NodeTimeout: 50 * time.Millisecond}
	e := newEnvOn(t, nodes, taptest.Observed(opts, observe))
	t.Cleanup(func() { g.set(false) }) // before the lockers close: a parked reader would hold them
	l, err := e.ls.Locker(lock.Redlock)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return l, g
}
