package opfuzz

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock"
)

// Grant is one lease a holder process was granted, as it reported it. The
// times are wall-clock Unix nanoseconds: the processes share the machine's
// clock. Acquired is read after the acquire returned, End before the
// release was sent (or ValidUntil for a lease never released early), so
// [Acquired, End) lies inside the time the holder took itself to hold it.
type Grant struct {
	PID        int    `json:"pid"`
	Variant    string `json:"variant"`
	Key        string `json:"key"`
	Owner      string `json:"owner"`
	Token      uint64 `json:"token,omitempty"`
	Fenced     bool   `json:"fenced"`
	TTL        string `json:"ttl"`
	Acquired   int64  `json:"acquired"`
	ValidUntil int64  `json:"valid_until"`
	// Released is when the holder sent its release, 0 if it never did.
	Released int64 `json:"released,omitempty"`
}

// End is when the holder stopped taking itself for the holder.
func (g Grant) End() int64 {
	if g.Released > 0 && g.Released < g.ValidUntil {
		return g.Released
	}
	return g.ValidUntil
}

// line is one line a holder writes: a grant, a release, or "ready" once
// its first try (and so its first meeting with every node) is over.
type line struct {
	Ready   bool   `json:"ready,omitempty"`
	Grant   *Grant `json:"grant,omitempty"`
	Release string `json:"release,omitempty"`
	At      int64  `json:"at,omitempty"`
}

// HolderConfig is what a holder process is told on its command line.
type HolderConfig struct {
	Addrs        []string
	User         string
	Password     string
	Namespace    string
	Variant      string
	TTL          time.Duration
	Keys         []string
	AwarenessOff bool
	// LogLevel is the lowest level of the lock's log the holder writes on
	// its stderr; "" writes none.
	LogLevel string
}

// args is the holder's command line.
func (h HolderConfig) args() []string {
	return []string{
		"-nodes", strings.Join(h.Addrs, ","), "-user", h.User, "-namespace", h.Namespace,
		"-variant", h.Variant, "-ttl", h.TTL.String(), "-keys", strings.Join(h.Keys, ","),
		fmt.Sprintf("-awareness-off=%t", h.AwarenessOff), "-log", h.LogLevel,
	}
}

// PasswordEnv carries the holders' password to a holder process, so that it
// is not on a command line.
const PasswordEnv = "OPFUZZ_HOLDER_PASSWORD"

// HolderMain is a holder process: it parses its command line, then tries
// the keys in a loop, holds every lease it is granted until just before its
// validity ends, and reports each grant and release as a JSON line on out.
// It returns when in closes (its parent stopped it) or ctx ends, releasing
// a lease it holds.
func HolderMain(ctx context.Context, args []string, getenv func(string) string, in io.Reader, out, logTo io.Writer) error {
	fs := flag.NewFlagSet("holder", flag.ContinueOnError)
	var h HolderConfig
	nodes := fs.String("nodes", "", "node addresses, comma-separated")
	keys := fs.String("keys", "k", "keys, comma-separated")
	fs.StringVar(&h.User, "user", "", "Redis user")
	fs.StringVar(&h.Namespace, "namespace", "opfuzz:", "key namespace")
	fs.StringVar(&h.Variant, "variant", lock.Redlock, "lock variant")
	fs.DurationVar(&h.TTL, "ttl", time.Second, "lease TTL")
	fs.BoolVar(&h.AwarenessOff, "awareness-off", false, "switch restart awareness off")
	fs.StringVar(&h.LogLevel, "log", "", "the lock's log on stderr from this level (debug, info, warn, error; \"\": none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h.Addrs, h.Keys, h.Password = strings.Split(*nodes, ","), strings.Split(*keys, ","), getenv(PasswordEnv)
	logger := slog.New(slog.DiscardHandler)
	if h.LogLevel != "" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(h.LogLevel)); err != nil {
			return fmt.Errorf("-log: %w", err)
		}
		logger = slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: level})).With("pid", os.Getpid(), "ttl", h.TTL)
	}
	var opts []*redis.Options
	for _, a := range h.Addrs {
		opts = append(opts, &redis.Options{Addr: a, Username: h.User, Password: h.Password})
	}
	ls, err := lock.New(opts, lock.Options{
		TTL: h.TTL, Namespace: h.Namespace, RestartAwarenessOff: h.AwarenessOff,
		Logger: logger,
	})
	if err != nil {
		return err
	}
	defer ls.Close()
	l, err := ls.Locker(h.Variant)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	say := func(v line) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(v)
	}
	first := true
	for ctx.Err() == nil {
		for _, key := range h.Keys {
			tryCtx, done := context.WithTimeout(ctx, h.TTL+5*time.Second)
			lease, err := l.TryAcquire(tryCtx, key)
			done()
			if first {
				say(line{Ready: true})
				first = false
			}
			if err != nil {
				continue
			}
			hold(ctx, lease, h, say)
		}
		sleep(ctx, time.Duration(2+rand.IntN(10))*time.Millisecond)
	}
	return nil
}

// hold reports lease, keeps it until just before its validity ends (or ctx
// ends), and releases it.
func hold(ctx context.Context, lease *lock.Lease, h HolderConfig, say func(line)) {
	g := Grant{
		Variant: h.Variant, Key: lease.Key(), Owner: lease.Owner(), TTL: h.TTL.String(),
		Acquired: time.Now().UnixNano(), ValidUntil: lease.ValidUntil().UnixNano(),
	}
	g.Token, g.Fenced = lease.Token()
	say(line{Grant: &g})
	sleep(ctx, time.Until(lease.ValidUntil())-5*time.Millisecond)
	at := time.Now().UnixNano()
	say(line{Release: g.Owner, At: at})
	relCtx, done := context.WithTimeout(context.Background(), time.Second)
	defer done()
	_ = lease.Release(relCtx)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// holderReader collects one holder process's lines into grants.
type holderReader struct {
	mu     sync.Mutex
	grants []Grant
	byOwn  map[string]int // owner → index in grants
	ready  chan struct{}
}

func newHolderReader() *holderReader {
	return &holderReader{byOwn: map[string]int{}, ready: make(chan struct{})}
}

// read reads r until it ends; pid is the process's.
func (hr *holderReader) read(r io.Reader, pid int) error {
	sc := bufio.NewScanner(r)
	readyOnce := sync.OnceFunc(func() { close(hr.ready) })
	defer readyOnce()
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("holder %d wrote %q: %w", pid, sc.Text(), err)
		}
		hr.mu.Lock()
		switch {
		case l.Ready:
			readyOnce()
		case l.Grant != nil:
			l.Grant.PID = pid
			hr.byOwn[l.Grant.Owner] = len(hr.grants)
			hr.grants = append(hr.grants, *l.Grant)
		case l.Release != "":
			if i, ok := hr.byOwn[l.Release]; ok {
				hr.grants[i].Released = l.At
			}
		}
		hr.mu.Unlock()
	}
	return sc.Err()
}

func (hr *holderReader) all() []Grant {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	return slices.Clone(hr.grants)
}
