package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"flashsale/lock/internal/fast"
	layout "flashsale/lock/internal/keys"
	"flashsale/lock/internal/node"
)

// Client is every variant of the ladder over one set of Redis nodes, built
// once at start-up so a request can pick its variant by name. Single-node
// variants use the first node; Redlock uses them all.
type Client struct {
	cfg    *config
	cancel context.CancelFunc // stops the nodes' background re-seeds
	nodes  []*node.Node
	byName map[string]*Locker
	names  []string // the rungs' names, the library's first
	wake   *waker
	fastMu sync.Mutex // orders SetFast's switch and the waker's listening
}

// New connects to the given Redis nodes (independent masters, one per
// Redlock vote; after a Sentinel-managed first one, Options.Sentinel) and
// builds every variant. It does not wait for the nodes: a
// node that is down now counts as failed until it answers.
func New(nodes []*redis.Options, o Options) (*Client, error) {
	cfg, err := o.settle()
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 && cfg.sentinel == nil {
		return nil, errors.New("lock: at least one Redis node is needed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Client{cfg: cfg, cancel: cancel}
	nc := cfg.nodeConfig()
	if cfg.sentinel != nil {
		s.nodes = append(s.nodes, node.NewFailover(ctx, cfg.sentinel, nc))
	}
	for _, o := range nodes {
		s.nodes = append(s.nodes, node.New(ctx, o, nc))
	}
	node.Join(s.nodes)
	s.wake = newWaker(cfg, s.nodes)
	if cfg.fast.Load() {
		s.wake.Listen()
	}
	for _, n := range s.nodes {
		n.Open()
	}
	p := parts{first: s.first(), clients: s.clients(), nodes: s.nodes, cfg: cfg}
	rungs := slices.Clone(library)
	for _, r := range o.Rungs {
		rungs = append(rungs, registered(r))
	}
	s.byName = make(map[string]*Locker, len(rungs))
	prefix := keys{lock: layout.Lock(cfg.namespace, ""), fence: layout.Fence(cfg.namespace, "")}
	for _, r := range rungs {
		if _, dup := s.byName[r.Name]; dup || r.Name == "" {
			s.Close()
			return nil, fmt.Errorf("lock: rung name %q is empty or taken", r.Name)
		}
		s.byName[r.Name] = &Locker{variant: r, v: r.build(p), cfg: cfg, wake: s.wake, reach: s.reach(r), prefix: prefix}
		s.names = append(s.names, r.Name)
	}
	return s, nil
}

// nodeConfig is what the nodes need of c, once New has settled it.
func (c *config) nodeConfig() *node.Config {
	return &node.Config{
		TTL: c.ttl, Timeout: c.nodeTimeout, Namespace: c.namespace, RestartAware: c.restartAware,
		SitOut: sitOut, Logger: c.logger,
	}
}

// first is the client of the node the single-node variants use.
func (s *Client) first() *redis.Client { return s.nodes[0].Client() }

// newWaker is the speed layer over the lockers' nodes, first node first.
func newWaker(cfg *config, nodes []*node.Node) *waker {
	fn := make([]fast.Node, len(nodes))
	for i, n := range nodes {
		fn[i] = n
	}
	fc := fast.Config{TTL: cfg.ttl, Timeout: cfg.nodeTimeout, Late: cfg.lateWindow(), Namespace: cfg.namespace,
		Lines: cfg.notifications, BackoffMin: cfg.backoffMin, BackoffMax: cfg.backoffMax, Logger: cfg.logger}
	return fast.New(fc, fn, (*Lease).ValidUntil, func(ctx context.Context, l *Lease) { l.releaseLater(ctx) })
}

// reach is how to check that the nodes a variant needs answer: a quorum, the
// first node, or none.
func (s *Client) reach(r rung) func(context.Context) error {
	if r.Quorum {
		return s.Ping
	}
	return func(ctx context.Context) error {
		if err := s.first().Ping(ctx).Err(); err != nil {
			return down(s.first(), err)
		}
		return nil
	}
}

// Locker returns the named variant, or ErrUnknownVariant.
func (s *Client) Locker(name string) (*Locker, error) {
	l, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownVariant, name, strings.Join(s.names, ", "))
	}
	return l, nil
}

// SetWatchdog switches the watchdog on or off for the leases granted from
// now on (a lease keeps the watchdog it was granted with), so the workshop
// can show the same cell with and without it on one running instance.
func (s *Client) SetWatchdog(on bool) { s.cfg.watchdog.Store(on) }

// SetFast switches the speed layer on or off for every variant, from the
// next acquire and release on; off, nothing of it listens. The expected
// outcome of every fault is the same either way.
func (s *Client) SetFast(on bool) {
	s.fastMu.Lock()
	defer s.fastMu.Unlock()
	s.cfg.fast.Store(on)
	if on {
		s.wake.Listen()
	} else {
		s.wake.Quiet()
	}
}

// clients are the Redis clients, one per node, first node first.
func (s *Client) clients() []*redis.Client {
	out := make([]*redis.Client, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.Client()
	}
	return out
}

// Ping reports ErrUnavailable unless a quorum of nodes would grant now: each
// answers a command on its votes' connection, as a vote is sent, with
// restart awareness's checks behind it, and its incarnation counts (not
// sitting out after a restart, a flush or a reset of its counts, its
// counters re-seeded); its go-redis client answers PING too (the
// single-node variants use it). A node silent on its votes' connection is
// not asked, so a frozen node cannot hold the answer past a caller's
// budget.
func (s *Client) Ping(ctx context.Context) error {
	errs := node.ForEach(ctx, s.nodes, s.cfg.nodeTimeout*4, func(ctx context.Context, n *node.Node) error {
		if n.Silent() {
			return fmt.Errorf("nothing heard on the votes' connection for %v: %w", s.cfg.nodeTimeout, context.DeadlineExceeded)
		}
		if err := n.Client().Ping(ctx).Err(); err != nil {
			return err
		}
		return n.Ready(ctx)
	})
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	if need := node.Quorum(len(s.nodes)); ok < need {
		return fmt.Errorf("%w: %d of %d nodes answer, %d needed: %w", ErrUnavailable, ok, len(s.nodes), need, errors.Join(errs...))
	}
	return nil
}

// Close stops the waker's listening, if it listens, and closes every client.
func (s *Client) Close() error {
	s.cancel()
	s.wake.Close()
	var errs []error
	for _, n := range s.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}
