// Package localredis starts independent Redis nodes on loopback ports and
// controls them (stop, kill, pause, restart with or without data) for tests,
// for the app's embedded default and for the load runner.
//
// Nodes are real redis-server processes, one per node, with no replication
// between them — the shape Redlock expects. When redis-server is not on PATH
// (or Options.InProcess is set) the nodes are in-process miniredis servers
// instead, so `go run .` works on a machine with nothing installed; see
// Node.Pause and Options.AOF for how faults are emulated there. Their TTLs run
// on the wall clock (miniredis ClockTTL), but miniredis (v2.40) has no keyspace
// notifications, no CONFIG and no INFO server section (so no run_id): code that
// waits for a key to go away must also poll.
package localredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"flashsale/internal/randhex"
	"flashsale/internal/redisacl"
)

// Options configures Start. The zero value starts real redis-server processes
// with persistence fully off in a temporary directory.
type Options struct {
	// Dir is the parent of the per-node data directories (Dir/node-<i>). They
	// are kept by Cluster.Stop, so a later cluster over the same Dir with AOF
	// finds its data again. "" means a fresh os.MkdirTemp directory that
	// Cluster.Stop removes.
	Dir string
	// AOF turns on appendonly (the persistence lab). Default: persistence
	// fully off (--save "" --appendonly no), so a restarted node is empty.
	AOF bool
	// AppendFsync is "always", "everysec" or "no"; used only with AOF.
	// Default "everysec".
	AppendFsync string
	// InProcess forces miniredis nodes even if redis-server exists.
	InProcess bool
	// Binary is the path of redis-server. Default: exec.LookPath("redis-server").
	// A Binary that is set but not executable is an error, not a fallback.
	Binary string
	// Logger receives start, stop and fallback messages. Default slog.Default().
	Logger *slog.Logger
	// Password, if set, is required from clients (requirepass / AUTH).
	// It cannot be combined with ACL.
	Password string
	// ACL starts redis-server nodes with the rules of package redisacl
	// (--aclfile): the default user off, the app's user (redisacl.AppUser),
	// which can run only what the app sends, and the admin user
	// (redisacl.AdminUser), each with a random password of this cluster.
	// URL is then the app user's URL and AdminURL the admin's. In-process
	// nodes have no ACL and ignore it (Cluster.ACL says which it is).
	ACL bool
	// Args are more redis-server arguments for every node (a test that
	// slows loading, say); in-process nodes ignore them.
	Args []string
}

// startAttempts bounds how often a node's first start picks a new port after
// losing a port to another process between our probe and redis' bind.
const startAttempts = 5

// Available reports whether redis-server is on PATH, i.e. whether Start
// without Options.InProcess or Options.Binary gives real processes.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Cluster is a set of independent nodes started by Start. Stop it when done.
type Cluster struct {
	// Nodes are indexed 0..n-1 in the order of Addrs and URLs.
	Nodes []*Node

	opts      Options
	log       *slog.Logger
	binary    string // "" for in-process nodes
	inProcess bool
	// appPassword and adminPassword are the ACL users' passwords, "" when
	// the nodes run without the ACL.
	appPassword, adminPassword string
	root                       string // parent of the node dirs; "" for in-process nodes
	tempRoot                   bool   // root was made by us and is removed on Stop
	// argv is a node's command line for its port and data dir: serverArgs
	// for data nodes, sentinelArgs for the sentinels of a SentinelCluster.
	argv func(port int, dir string) []string

	mu      sync.Mutex
	stopped bool
}

// Start starts n independent nodes on free loopback ports and waits until
// each answers PING. ctx bounds the start-up only: the nodes keep running
// after ctx ends, until Cluster.Stop. On error nothing is left running.
func Start(ctx context.Context, n int, opts Options) (*Cluster, error) {
	return start(ctx, n, opts, nil)
}

// start is Start with another command line than serverArgs when argv is set;
// such nodes must be real processes.
func start(ctx context.Context, n int, opts Options, argv func(port int, dir string) []string) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("localredis: need at least one node, got %d", n)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch opts.AppendFsync {
	case "":
		opts.AppendFsync = "everysec"
	case "always", "everysec", "no":
	default:
		return nil, fmt.Errorf("localredis: AppendFsync %q: want always, everysec or no", opts.AppendFsync)
	}
	if opts.ACL && opts.Password != "" {
		return nil, errors.New("localredis: Options.ACL and Options.Password exclude each other: the ACL gives each user a password of its own")
	}
	c := &Cluster{opts: opts, log: opts.Logger, inProcess: opts.InProcess, argv: argv}
	if c.argv == nil {
		c.argv = c.serverArgs
	}

	if !c.inProcess {
		switch {
		case opts.Binary != "":
			bin, err := exec.LookPath(opts.Binary)
			if err != nil {
				return nil, fmt.Errorf("localredis: Options.Binary: %w", err)
			}
			c.binary = bin
		default:
			bin, err := exec.LookPath("redis-server")
			if err != nil {
				c.inProcess = true
				c.log.Warn("localredis: redis-server not found on PATH; using in-process miniredis nodes (no persistence, no keyspace notifications)")
			} else {
				c.binary = bin
			}
		}
	} else {
		c.log.Info("localredis: using in-process miniredis nodes (Options.InProcess)")
	}

	if opts.ACL && !c.inProcess {
		c.appPassword, c.adminPassword = randhex.String(16), randhex.String(16)
	}
	if !c.inProcess {
		if err := c.makeDirs(n); err != nil {
			return nil, err
		}
	}
	c.Nodes = make([]*Node, n)
	for i := range c.Nodes {
		nd := &Node{c: c, index: i}
		if !c.inProcess {
			nd.dir = filepath.Join(c.root, "node-"+strconv.Itoa(i))
		}
		c.Nodes[i] = nd
	}

	// Start nodes concurrently: a load run may ask for many.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range c.Nodes {
		wg.Go(func() { errs[i] = nd.startFirst(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *Cluster) makeDirs(n int) error {
	if c.opts.Dir == "" {
		root, err := os.MkdirTemp("", "localredis-*")
		if err != nil {
			return fmt.Errorf("localredis: %w", err)
		}
		c.root, c.tempRoot = root, true
	} else {
		c.root = c.opts.Dir
	}
	for i := range n {
		if err := os.MkdirAll(filepath.Join(c.root, "node-"+strconv.Itoa(i)), 0o755); err != nil {
			if c.tempRoot {
				os.RemoveAll(c.root)
			}
			return fmt.Errorf("localredis: %w", err)
		}
	}
	return nil
}

// Aged waits until every running node has been up for at least d, as the
// node's own INFO uptime_in_seconds (whole seconds) tells, or ctx is done.
// A lock with restart awareness does not let a node younger than its TTL
// plus drift vote, since it cannot tell a first start from a restart that
// lost its data. In-process nodes cannot restart apart from this process
// and have no uptime to tell: they are not waited for.
func (c *Cluster) Aged(ctx context.Context, d time.Duration) error {
	if c.inProcess {
		return nil
	}
	for _, n := range c.Nodes {
		for {
			if !n.Running() {
				break
			}
			up, err := uptime(ctx, n.Addr(), c.admin())
			if err == nil && up >= d {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %d not up for %v yet (%v, %v): %w", n.index, d, up, err, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// ACL reports whether the nodes run the ACL of package redisacl: asked
// for by Options.ACL, and real redis-server processes.
func (c *Cluster) ACL() bool { return c.appPassword != "" }

// InProcess reports whether the nodes are in-process miniredis servers
// rather than redis-server processes.
func (c *Cluster) InProcess() bool { return c.inProcess }

// Addrs returns every node's "127.0.0.1:port".
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// URLs returns every node's URL (Node.URL), node 0 first, ready for
// redis.ParseURL.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL()
	}
	return out
}

// AdminURLs returns every node's admin URL (Node.AdminURL), node 0 first.
func (c *Cluster) AdminURLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.AdminURL()
	}
	return out
}

// Stop stops every node (SIGTERM, SIGKILL after 3s, by PID), waits for them
// to exit and removes the temporary directory. It is idempotent, and nodes
// that were already stopped or killed are not an error. Nodes cannot be
// started again afterwards.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()

	errs := make([]error, len(c.Nodes)+1)
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		wg.Go(func() { errs[i] = n.shutdown() })
	}
	wg.Wait()
	if c.tempRoot {
		if err := os.RemoveAll(c.root); err != nil {
			errs[len(c.Nodes)] = fmt.Errorf("localredis: remove %s: %w", c.root, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// credentials are who a connection authenticates as: user "" is the
// default user, and password "" means no AUTH at all.
type credentials struct{ user, password string }

// app is who the app connects as: the ACL's app user, or the default user
// with Options.Password.
func (c *Cluster) app() credentials {
	if c.ACL() {
		return credentials{redisacl.AppUser, c.appPassword}
	}
	return credentials{password: c.opts.Password}
}

// admin is who operator actions (and this package's own probes and marks)
// connect as: the ACL's admin user, or the default user.
func (c *Cluster) admin() credentials {
	if c.ACL() {
		return credentials{redisacl.AdminUser, c.adminPassword}
	}
	return credentials{password: c.opts.Password}
}

// nodeURL builds redis://[user:password@]addr.
func nodeURL(addr string, who credentials) string {
	u := url.URL{Scheme: "redis", Host: addr}
	if who.password != "" {
		u.User = url.UserPassword(who.user, who.password)
	}
	return u.String()
}

// serverArgs is the redis-server command line for one node.
func (c *Cluster) serverArgs(port int, dir string) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--dir", dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		// K = keyspace channel, g = generic (DEL …), x = expired: the lock
		// package subscribes to these to wake waiters when a lock goes away.
		"--notify-keyspace-events", "Kgx",
		"--logfile", filepath.Join(dir, logName),
	}
	if c.opts.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", c.opts.AppendFsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	if c.opts.Password != "" {
		args = append(args, "--requirepass", c.opts.Password)
	}
	if c.ACL() {
		args = append(args, "--aclfile", filepath.Join(dir, aclName))
	}
	return append(args, c.opts.Args...)
}
