package localredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"flashsale/internal/redisinfo"
)

// ErrNoRedisServer is returned by StartSentinel where redis-server is not
// on PATH: a failover needs real processes, miniredis has no replication.
var ErrNoRedisServer = errors.New("localredis: a Sentinel cluster needs redis-server on PATH")

// SentinelOptions configures StartSentinel. The zero value is one master,
// one replica and three sentinels, quorum two, that fail over a master
// silent for three seconds.
type SentinelOptions struct {
	// MasterName is the name the sentinels monitor the master under.
	// Default "flashsale".
	MasterName string
	// Sentinels is how many sentinels to start. Default 3.
	Sentinels int
	// DownAfter is how long the master must be silent before a sentinel
	// calls it down (down-after-milliseconds). Default and least 3s
	// (minDownAfter): a lab waits for a failover, not for production's 30s.
	DownAfter time.Duration
	// FailoverTimeout is the sentinels' failover-timeout; a sentinel will
	// not fail the same master over again within twice this. Default 5s.
	FailoverTimeout time.Duration
	// Binary is redis-server (run with --sentinel for the sentinels, which
	// is all Debian's redis-sentinel is). Default: exec.LookPath.
	Binary string
	// Logger receives start and stop messages. Default slog.Default().
	Logger *slog.Logger
}

// minDownAfter is the shortest down-after-milliseconds StartSentinel uses.
// At a failover's end each sentinel drops its link to the old master and
// opens one to the promoted node, which must then answer within down-after,
// or the sentinel calls the new master down and fails over again, to
// whatever replica it has: at that moment the emptied old master, coming
// back. A sentinel reconnects and pings on a one-second period, so at 1s
// one late tick on a busy machine is enough for a second failover, with
// Heal left waiting for a replication link the sentinels have just turned
// around. Three seconds leave two periods of margin.
const minDownAfter = 3 * time.Second

// SentinelCluster is one Redis master with one replica, watched by
// sentinels that promote the replica when the master dies: the usual
// "highly available" single Redis a lock is put on. Replication is
// asynchronous, which is the point of the lab: a write acknowledged by the
// master may never reach the replica that takes over.
type SentinelCluster struct {
	// Data are the two data nodes: Data.Nodes[0] starts as the master,
	// Data.Nodes[1] as its replica. Failovers swap their roles.
	Data *Cluster
	// Sentinels are the sentinel processes.
	Sentinels *Cluster

	name string
	root string // holds the sentinels' config files; removed by Stop
	log  *slog.Logger
}

// StartSentinel starts the data nodes, makes the second a replica of the
// first, starts the sentinels and waits until every sentinel names the
// master, sees its replica in sync and knows every other sentinel: only
// then can a failover be agreed on. On error nothing is left running.
func StartSentinel(ctx context.Context, opts SentinelOptions) (_ *SentinelCluster, err error) {
	if opts.MasterName == "" {
		opts.MasterName = "flashsale"
	}
	if opts.Sentinels <= 0 {
		opts.Sentinels = 3
	}
	opts.DownAfter = max(opts.DownAfter, minDownAfter)
	if opts.FailoverTimeout <= 0 {
		opts.FailoverTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	bin := opts.Binary
	if bin == "" {
		bin = "redis-server"
	}
	if bin, err = exec.LookPath(bin); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoRedisServer, err)
	}
	s := &SentinelCluster{name: opts.MasterName, log: opts.Logger}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	if s.Data, err = Start(ctx, 2, Options{Binary: bin, Logger: opts.Logger}); err != nil {
		return nil, err
	}
	master := s.Data.Nodes[0]
	if err = s.follow(ctx, s.Data.Nodes[1], master); err != nil {
		return nil, err
	}
	if s.root, err = os.MkdirTemp("", "localredis-sentinel-*"); err != nil {
		return nil, fmt.Errorf("localredis: %w", err)
	}
	host, port, _ := net.SplitHostPort(master.Addr())
	conf := fmt.Sprintf("sentinel monitor %s %s %s %d\n"+
		"sentinel down-after-milliseconds %[1]s %[5]d\n"+
		"sentinel failover-timeout %[1]s %[6]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		s.name, host, port, opts.Sentinels/2+1, opts.DownAfter.Milliseconds(), opts.FailoverTimeout.Milliseconds())
	for i := range opts.Sentinels {
		dir := filepath.Join(s.root, "node-"+strconv.Itoa(i))
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("localredis: %w", err)
		}
		// Sentinels rewrite their config file as they learn: each needs
		// its own, writable.
		if err = os.WriteFile(filepath.Join(dir, sentinelConf), []byte(conf), 0o644); err != nil {
			return nil, fmt.Errorf("localredis: %w", err)
		}
	}
	s.Sentinels, err = start(ctx, opts.Sentinels, Options{Binary: bin, Logger: opts.Logger, Dir: s.root}, sentinelArgs)
	if err != nil {
		return nil, err
	}
	if err = s.WaitSettled(ctx, master); err != nil {
		return nil, err
	}
	s.log.Info("localredis: sentinel cluster ready", "master", master.Addr(), "replica", s.Data.Nodes[1].Addr(),
		"sentinels", strings.Join(s.Sentinels.Addrs(), ","))
	return s, nil
}

const sentinelConf = "sentinel.conf"

// sentinelArgs runs redis-server in sentinel mode on the config file
// StartSentinel wrote into dir.
func sentinelArgs(port int, dir string) []string {
	return []string{
		filepath.Join(dir, sentinelConf), "--sentinel",
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", filepath.Join(dir, logName),
	}
}

// MasterName is the name the sentinels monitor the master under.
func (s *SentinelCluster) MasterName() string { return s.name }

// URL names the master through the sentinels:
// redis-sentinel://127.0.0.1:p1,127.0.0.1:p2,…/mastername, the form the
// storefront's -redis-sentinel flag takes.
func (s *SentinelCluster) URL() string {
	u := url.URL{Scheme: "redis-sentinel", Host: strings.Join(s.Sentinels.Addrs(), ","), Path: "/" + s.name}
	return u.String()
}

// Master is the data node the sentinels name as master now (asked of the
// first sentinel that answers).
func (s *SentinelCluster) Master(ctx context.Context) (*Node, error) {
	var errs []error
	for _, sn := range s.Sentinels.Nodes {
		addr, err := s.masterAddr(ctx, sn)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return s.dataNode(addr)
	}
	return nil, fmt.Errorf("localredis: no sentinel names the master: %w", errors.Join(errs...))
}

// HoldBack freezes the replica (SIGSTOP) and drops its replication link on
// the master (CLIENT KILL TYPE replica), in that order, so the frozen
// replica cannot dial back in: every write the master acknowledges from now
// on reaches no replica. It is the "master dies before replicating" moment
// made certain rather than lucky: a merely slow link could still deliver
// the write, and a frozen replica alone still finds the write in its socket
// buffer when it thaws. Thaw the replica with its Node.Resume once the
// master is gone; it then comes back with nothing since HoldBack.
func (s *SentinelCluster) HoldBack(ctx context.Context) (replica *Node, err error) {
	master, err := s.Master(ctx)
	if err != nil {
		return nil, err
	}
	replica = s.Data.Nodes[1-master.Index()]
	if err := replica.Pause(); err != nil {
		return nil, err
	}
	if _, err := command(ctx, master.Addr(), "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		return nil, errors.Join(fmt.Errorf("localredis: drop the replica's link: %w", err), replica.Resume())
	}
	return replica, nil
}

// WaitSettled waits until every sentinel names master, sees the other data
// node as its replica with the link up, and knows every other sentinel:
// the state in which a master's death is noticed and a failover agreed on.
// It also waits for the data nodes themselves to agree (master's role and
// the replica's master_link_status). Use it after StartSentinel's own wait
// and after Heal.
func (s *SentinelCluster) WaitSettled(ctx context.Context, master *Node) error {
	replica := s.Data.Nodes[1-master.Index()]
	return poll(ctx, func() error {
		if err := checkRole(ctx, master.Addr(), "master"); err != nil {
			return err
		}
		if err := checkRole(ctx, replica.Addr(), "slave"); err != nil {
			return err
		}
		for _, sn := range s.Sentinels.Nodes {
			if err := s.sentinelSettled(ctx, sn, master, replica); err != nil {
				return fmt.Errorf("sentinel %s: %w", sn.Addr(), err)
			}
		}
		return nil
	})
}

// WaitFailover waits until every sentinel names a master other than old,
// and that node says it is a master: the replica was promoted.
func (s *SentinelCluster) WaitFailover(ctx context.Context, old *Node) (*Node, error) {
	promoted := s.Data.Nodes[1-old.Index()]
	err := poll(ctx, func() error {
		for _, sn := range s.Sentinels.Nodes {
			addr, err := s.masterAddr(ctx, sn)
			if err != nil {
				return err
			}
			if addr != promoted.Addr() {
				return fmt.Errorf("sentinel %s still names %s", sn.Addr(), addr)
			}
		}
		return checkRole(ctx, promoted.Addr(), "master")
	})
	if err != nil {
		return nil, fmt.Errorf("localredis: no failover from %s: %w", old.Addr(), err)
	}
	return promoted, nil
}

// Heal brings the cluster back to a master and a replica in sync after a
// failover: a paused node is resumed, a dead one started again (empty) and
// made a replica of whichever node the sentinels name as master now; then
// it waits until the sentinels have settled on that. The roles stay as the
// failover left them.
func (s *SentinelCluster) Heal(ctx context.Context) error {
	for _, n := range s.Data.Nodes {
		if err := n.Resume(); err != nil {
			return err
		}
	}
	master, err := s.Master(ctx)
	if err != nil {
		return err
	}
	if !master.Running() {
		// Nobody took over: the sentinels keep naming the dead node.
		if err := master.Start(ctx); err != nil {
			return err
		}
	}
	replica := s.Data.Nodes[1-master.Index()]
	if !replica.Running() {
		if err := replica.Start(ctx); err != nil {
			return err
		}
	}
	if err := s.follow(ctx, replica, master); err != nil {
		return err
	}
	return s.WaitSettled(ctx, master)
}

// Stop stops the sentinels first (so the data nodes' shutdown starts no
// failover), then the data nodes, and removes the temporary directories.
func (s *SentinelCluster) Stop() error {
	var errs []error
	if s.Sentinels != nil {
		errs = append(errs, s.Sentinels.Stop())
	}
	if s.Data != nil {
		errs = append(errs, s.Data.Stop())
	}
	if s.root != "" {
		errs = append(errs, os.RemoveAll(s.root))
	}
	return errors.Join(errs...)
}

// follow makes replica replicate master (REPLICAOF) unless it already does,
// and waits until its link is up.
func (s *SentinelCluster) follow(ctx context.Context, replica, master *Node) error {
	host, port, _ := net.SplitHostPort(master.Addr())
	info, err := command(ctx, replica.Addr(), "INFO", "replication")
	if err != nil {
		return fmt.Errorf("localredis: node %d: %w", replica.Index(), err)
	}
	if h, _ := redisinfo.Field(info, "master_host"); h != host || !hasField(info, "master_port", port) {
		if _, err := command(ctx, replica.Addr(), "REPLICAOF", host, port); err != nil {
			return fmt.Errorf("localredis: node %d: REPLICAOF %s: %w", replica.Index(), master.Addr(), err)
		}
	}
	return poll(ctx, func() error {
		info, err := command(ctx, replica.Addr(), "INFO", "replication")
		if err != nil {
			return err
		}
		if !hasField(info, "master_link_status", "up") {
			return fmt.Errorf("node %d: replication link to %s not up yet", replica.Index(), master.Addr())
		}
		return nil
	})
}

// sentinelSettled checks one sentinel's view; see WaitSettled.
func (s *SentinelCluster) sentinelSettled(ctx context.Context, sn, master, replica *Node) error {
	// INFO on a sentinel sums up each master it watches in one line:
	// master0:name=…,status=ok,address=…,slaves=1,sentinels=3
	info, err := command(ctx, sn.Addr(), "INFO", "sentinel")
	if err != nil {
		return err
	}
	want := fmt.Sprintf("name=%s,status=ok,address=%s,slaves=1,sentinels=%d", s.name, master.Addr(), len(s.Sentinels.Nodes))
	if !strings.Contains(info, want) {
		return fmt.Errorf("INFO sentinel %q does not say %q yet", strings.TrimSpace(info), want)
	}
	// slaves=1 counts a dead former master too: the replica it knows must
	// be the live one, answering its pings, in sync.
	r, err := command(ctx, sn.Addr(), "SENTINEL", "REPLICAS", s.name)
	if err != nil {
		return err
	}
	kv := pairs(r)
	if kv["name"] != replica.Addr() || kv["flags"] != "slave" || kv["master-link-status"] != "ok" {
		return fmt.Errorf("replica %s not seen up and in sync yet (name %s, flags %s, link %s)",
			replica.Addr(), kv["name"], kv["flags"], kv["master-link-status"])
	}
	return nil
}

// masterAddr asks one sentinel for the master's address.
func (s *SentinelCluster) masterAddr(ctx context.Context, sn *Node) (string, error) {
	r, err := command(ctx, sn.Addr(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.name)
	if err != nil {
		return "", fmt.Errorf("sentinel %s: %w", sn.Addr(), err)
	}
	host, port, ok := strings.Cut(r, "\n")
	if !ok {
		return "", fmt.Errorf("sentinel %s: no master named %s (%q)", sn.Addr(), s.name, r)
	}
	return net.JoinHostPort(host, port), nil
}

// dataNode finds the data node listening on addr.
func (s *SentinelCluster) dataNode(addr string) (*Node, error) {
	for _, n := range s.Data.Nodes {
		if n.Addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("localredis: the sentinels name %s, which is none of our data nodes", addr)
}

// poll calls check every 50 ms until it succeeds or ctx ends, or 30 s
// pass (a failover on a loaded machine takes a few seconds).
func poll(ctx context.Context, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
