package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"flashsale/internal/locktap"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// childCommand is the hidden first argument that makes the binary one
// contender process instead of the benchmark.
const childCommand = "child"

// The child protocol, over the child's stdin and stdout: the child connects,
// warms up and prints readyLine; the parent, once every child is ready,
// writes "<start> <end>" in monoNow nanoseconds; the child contends for the
// key from start to end and prints its childReport as one JSON line. A
// child whose stdin closes gives up, so none outlives its parent.
const readyLine = "ready"

// section is one grant: how long its acquire waited, and when its critical
// section began and ended on the shared clock (monoNow). Start is read after
// the acquire returned and End before the release was sent, so the interval
// lies inside the lock's real hold: with a correct lock no two intervals
// overlap, whichever processes recorded them.
type section struct {
	Wait  int64 `json:"w"`
	Start int64 `json:"s"`
	End   int64 `json:"e"`
	proc  int   // which contender process, set by the parent
}

// childReport is what one contender process did.
type childReport struct {
	PID int `json:"pid"`
	// Clients are the goroutines' grants, one slice per goroutine.
	Clients [][]section `json:"clients"`
	// Cut counts acquires still waiting when the run ended.
	Cut int `json:"cut"`
	// GaveUp counts acquires the library gave up on before the end (redsync
	// after its tries), and ReleaseErrors failed releases; both by message.
	GaveUp map[string]int `json:"gave_up,omitempty"`
	// Tries is how many attempts the granted acquires made in all (the
	// project's lock only: redsync does not say).
	Tries         int64          `json:"tries,omitempty"`
	ReleaseErrors map[string]int `json:"release_errors,omitempty"`
}

// pair is one acquire of some lock on key; unlock releases it.
type pair func(ctx context.Context, key string) (unlock func(context.Context) error, err error)

// childFlags are what the parent tells a contender.
type childFlags struct {
	variant     string
	redis       string
	namespace   string
	key         string
	goroutines  int
	ttl         time.Duration
	nodeTimeout time.Duration
	section     time.Duration
}

func (f childFlags) args() []string {
	return []string{childCommand,
		"-variant", f.variant, "-redis", f.redis, "-namespace", f.namespace, "-key", f.key,
		"-goroutines", fmt.Sprint(f.goroutines), "-ttl", f.ttl.String(),
		"-node-timeout", f.nodeTimeout.String(), "-section", f.section.String(),
	}
}

// runChild is one contender process. args follow childCommand.
func runChild(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	var f childFlags
	fs := flag.NewFlagSet(childCommand, flag.ContinueOnError)
	fs.StringVar(&f.variant, "variant", lock.Redlock, "lock variant or "+ladder.Redsync)
	fs.StringVar(&f.redis, "redis", "", "node URLs, comma-separated")
	fs.StringVar(&f.namespace, "namespace", "hotkey:", "key namespace")
	fs.StringVar(&f.key, "key", "hot", "the contended key")
	fs.IntVar(&f.goroutines, "goroutines", 8, "contenders in this process")
	fs.DurationVar(&f.ttl, "ttl", 2*time.Second, "lease TTL")
	fs.DurationVar(&f.nodeTimeout, "node-timeout", 0, "per-node timeout (0: the lock's default)")
	fs.DurationVar(&f.section, "section", time.Millisecond, "critical section")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nodes, err := parseNodes(f.redis)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var tries atomic.Int64
	p, closeLock, err := newPair(ctx, f, nodes, func(e locktap.Event) {
		if e.Kind == locktap.Acquired {
			tries.Add(int64(e.Tries))
		}
	})
	if err != nil {
		return err
	}
	defer closeLock()

	lines := make(chan string)
	go func() {
		// The stdin reader ends the child when the parent goes away.
		defer cancel()
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	if _, err := fmt.Fprintln(stdout, readyLine); err != nil {
		return err
	}
	var start, end int64
	select {
	case line := <-lines:
		if _, err := fmt.Sscan(line, &start, &end); err != nil {
			return fmt.Errorf("start line %q: %w", line, err)
		}
	case <-ctx.Done():
		return fmt.Errorf("no start from the parent: %w", ctx.Err())
	}
	warmTries := tries.Load()
	rep := contend(ctx, p, f.key, f.goroutines, f.section, start, end)
	rep.PID = os.Getpid()
	rep.Tries = tries.Load() - warmTries
	return json.NewEncoder(stdout).Encode(rep)
}

// contend runs goroutines contenders on key from start to end (monoNow).
func contend(ctx context.Context, p pair, key string, goroutines int, d time.Duration, start, end int64) childReport {
	time.Sleep(time.Duration(start - monoNow()))
	ctx, cancel := context.WithTimeout(ctx, time.Duration(end-monoNow()))
	defer cancel()
	rep := childReport{Clients: make([][]section, goroutines), GaveUp: map[string]int{}, ReleaseErrors: map[string]int{}}
	var mu sync.Mutex
	count := func(m map[string]int, err error) {
		mu.Lock()
		defer mu.Unlock()
		m[err.Error()]++
	}
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := monoNow()
				unlock, err := p(ctx, key)
				if err != nil {
					if ctx.Err() != nil {
						mu.Lock()
						rep.Cut++
						mu.Unlock()
						return
					}
					count(rep.GaveUp, err)
					time.Sleep(time.Millisecond) // a library that gives up at once must not spin
					continue
				}
				s := monoNow()
				time.Sleep(d)
				e := monoNow()
				rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
				if err := unlock(rctx); err != nil {
					count(rep.ReleaseErrors, err)
				}
				rcancel()
				rep.Clients[i] = append(rep.Clients[i], section{Wait: s - t0, Start: s, End: e})
			}
		})
	}
	wg.Wait()
	return rep
}

// newPair builds the lock a contender uses and waits until it can be taken:
// the nodes vote (restart awareness) and each node has a warm connection.
func newPair(ctx context.Context, f childFlags, nodes []*redis.Options, observe func(locktap.Event)) (pair, func(), error) {
	ready, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// redsync, here, is the reference itself: github.com/go-redsync/redsync/v4
	// with its defaults (32 tries, 50–250 ms apart) over the same nodes.
	if f.variant == ladder.Redsync {
		rs, closeRs := redsyncOver(nodes)
		p := redsyncPair(rs, f.namespace, f.ttl)
		if err := warm(ready, p); err != nil {
			closeRs()
			return nil, nil, err
		}
		return p, closeRs, nil
	}
	// The child's stderr reaches the user only when the run fails.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ls, err := votingLockers(ready, nodes, f.namespace, f.ttl, f.nodeTimeout, log, observe)
	if err != nil {
		return nil, nil, err
	}
	closeLs := func() { _ = ls.Close() }
	l, err := ls.Locker(f.variant)
	if err == nil {
		err = warm(ready, lockPair(l))
	}
	if err != nil {
		closeLs()
		return nil, nil, err
	}
	return lockPair(l), closeLs, nil
}

// votingLockers builds the project's locks over nodes and waits until a
// quorum of them votes.
func votingLockers(ctx context.Context, nodes []*redis.Options, namespace string, ttl, nodeTimeout time.Duration, log *slog.Logger, observe func(locktap.Event)) (*lock.Client, error) {
	opts := lock.Options{TTL: ttl, Namespace: namespace, Logger: log, NodeTimeout: nodeTimeout}
	ls, err := lock.New(nodes, ladder.With(locktap.Tapped(opts, locktap.Tap{Observer: observe})))
	if err != nil {
		return nil, err
	}
	for {
		err := ls.Ping(ctx)
		if err == nil {
			return ls, nil
		}
		select {
		case <-ctx.Done():
			_ = ls.Close()
			return nil, fmt.Errorf("nodes never ready to vote: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// redsyncOver is redsync with its defaults over nodes; close closes its
// clients.
func redsyncOver(nodes []*redis.Options) (*redsync.Redsync, func()) {
	var pools []rsredis.Pool
	var clients []*redis.Client
	for _, o := range nodes {
		c := redis.NewClient(o)
		clients = append(clients, c)
		pools = append(pools, rsgoredis.NewPool(c))
	}
	return redsync.New(pools...), func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
}

// redsyncPair is an acquire of a redsync mutex with the lease TTL and every
// other option at its default.
func redsyncPair(rs *redsync.Redsync, namespace string, ttl time.Duration) pair {
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		m := rs.NewMutex(namespace+key, redsync.WithExpiry(ttl))
		if err := m.LockContext(ctx); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			_, err := m.UnlockContext(ctx)
			return err
		}, nil
	}
}

// lockPair is an acquire of the project's lock.
func lockPair(l *lock.Locker) pair {
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			return nil, err
		}
		return lease.Release, nil
	}
}

// warm takes and gives back a key of this process's own, so the first
// contended acquire does not pay for connections.
func warm(ctx context.Context, p pair) error {
	unlock, err := p(ctx, fmt.Sprintf("warm:%d", os.Getpid()))
	if err != nil {
		return fmt.Errorf("warm-up acquire: %w", err)
	}
	return unlock(ctx)
}

// parseNodes turns comma-separated redis:// URLs into client options.
func parseNodes(s string) ([]*redis.Options, error) {
	var out []*redis.Options
	for u := range strings.SplitSeq(s, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("node %q: %w", u, err)
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil, errors.New("no Redis node given")
	}
	return out, nil
}
