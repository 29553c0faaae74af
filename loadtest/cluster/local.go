// Package cluster is the environment the load runner starts for itself and
// the faults it does to it: real redis-server nodes (a Sentinel cluster where
// a scenario needs failover), reached through toxiproxy proxies so the
// network between an instance and a node can be slowed or cut, and the
// storefront processes sharing one database; the node recipes that stop,
// restart, jump or partition those nodes during an attack; and the scan for
// lock keys left without a TTL. Every process it starts it stops by PID.
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/randhex"
)

// LocalConfig configures the environment the runner starts for itself: its
// own Redis nodes and storefront instances sharing one SQLite file.
type LocalConfig struct {
	// Instances is the number of app instances (K). Default 3.
	Instances int
	// Nodes is the number of Redis nodes. Default 5.
	Nodes int
	// AppBin is a storefront binary to run; "" builds one from ModuleDir.
	AppBin string
	// ModuleDir is the flashsale module root; "" finds it from the working
	// directory upwards.
	ModuleDir string
	// Dir holds the binary, the database and the logs; "" is a temporary
	// directory removed by Close.
	Dir string
	// LockTTL and LockWait are the instances' -lock-ttl and -lock-wait.
	LockTTL  time.Duration
	LockWait time.Duration
	// ExtraArgs are added to every instance's command line.
	ExtraArgs []string
	// UnawareArgs turn Redlock restart awareness off on an instance.
	// Default DefaultUnawareArgs.
	UnawareArgs []string
	// Logger receives what the environment does. Default slog.Default().
	Logger *slog.Logger
	// AOF starts the Redis nodes with appendonly on, so a node killed and
	// restarted with its data keeps its keys (the chaos runner's node
	// crashes).
	AOF bool
	// DB is the instances' database: "" for a SQLite file in Dir, else a
	// postgres:// URL (the app's -db), whose tables every reset clears.
	DB string
	// History makes every instance record its leases and store writes in
	// Dir/history-app<i>.jsonl (the app's -history).
	History bool
}

// DefaultUnawareArgs is the storefront flag that turns Redlock restart
// awareness off.
var DefaultUnawareArgs = []string{"-restart-aware=false"}

// Local is a running local environment. Close stops everything it started,
// by PID, and nothing else.
type Local struct {
	cfg     LocalConfig
	log     *slog.Logger
	dir     string
	tempDir bool
	bin     string
	token   string
	cluster *localredis.Cluster
	// sentinel is the Sentinel cluster of the failover column, started the
	// first time instances are asked to use it.
	sentinel *localredis.SentinelCluster
	net      *Network // instance i reaches node j through net.Addr(i, j)
	apps     []*appProc
	addrs    []string // each instance's listen address, kept across restarts
	// settings are what the instances run with now; failed remembers
	// settings they would not start with, and why.
	settings AppSettings
	failed   map[AppSettings]error
}

// StartLocal builds the storefront (unless AppBin is given), starts the
// Redis nodes and the app instances, and waits until every instance is
// ready. On error nothing is left running.
func StartLocal(ctx context.Context, cfg LocalConfig) (_ *Local, err error) {
	if cfg.Instances <= 0 {
		cfg.Instances = 3
	}
	if cfg.Nodes <= 0 {
		cfg.Nodes = 5
	}
	if cfg.UnawareArgs == nil {
		cfg.UnawareArgs = DefaultUnawareArgs
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Local{cfg: cfg, log: cfg.Logger, dir: cfg.Dir, failed: map[AppSettings]error{}}
	l.settings = AppSettings{LockTTL: cfg.LockTTL}
	defer func() {
		if err != nil {
			_ = l.Close()
		}
	}()
	if l.dir == "" {
		if l.dir, err = os.MkdirTemp("", "flashsale-loadtest-"); err != nil {
			return nil, err
		}
		l.tempDir = true
	} else if err = os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	// A database left by an earlier run in a kept directory would only be
	// reset anyway; starting without it also survives a schema change. Old
	// logs would only mislead.
	for _, f := range []string{"sale.db", "sale.db-wal", "sale.db-shm", "logs"} {
		if err = os.RemoveAll(filepath.Join(l.dir, f)); err != nil {
			return nil, err
		}
	}
	if err = os.MkdirAll(filepath.Join(l.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	for _, f := range l.HistoryFiles() { // appended to by the instances: start empty
		if err = os.RemoveAll(f); err != nil {
			return nil, err
		}
	}
	if l.bin, err = l.binary(ctx); err != nil {
		return nil, err
	}
	l.token = randhex.String(16)

	l.cluster, err = localredis.Start(ctx, cfg.Nodes, localredis.Options{Logger: cfg.Logger, AOF: cfg.AOF})
	if err != nil {
		return nil, fmt.Errorf("start %d redis nodes: %w", cfg.Nodes, err)
	}
	if l.cluster.InProcess() {
		// In-process nodes live in this runner, not in the app instances:
		// useless to them. Real redis-server processes are needed.
		return nil, errors.New("redis-server is not on PATH: the load runner needs real Redis nodes")
	}
	if l.net, err = StartNetwork(cfg.Instances, l.cluster.Addrs()); err != nil {
		return nil, fmt.Errorf("proxies to the nodes: %w", err)
	}
	if err = l.startApps(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// binary returns the storefront binary, building it once if none was given.
func (l *Local) binary(ctx context.Context) (string, error) {
	if l.cfg.AppBin != "" {
		return l.cfg.AppBin, nil
	}
	mod := l.cfg.ModuleDir
	if mod == "" {
		var err error
		if mod, err = FindModule("."); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(l.dir, "flashsale")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = mod
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	l.log.Info("building the storefront", "module", mod, "bin", bin)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build the storefront in %s: %w\n%s", mod, err, out.String())
	}
	return bin, nil
}

// FindModule walks up from dir to the directory whose go.mod declares
// module flashsale.
func FindModule(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modulePath(b) == "flashsale" {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no flashsale module at or above %s: run from the module or pass -app-bin", abs)
		}
	}
}

func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Bases are the instances' base URLs.
func (l *Local) Bases() []string {
	out := make([]string, len(l.apps))
	for i, a := range l.apps {
		out[i] = a.base
	}
	return out
}

// Token is the admin token the instances were started with.
func (l *Local) Token() string { return l.token }

// RedisURLs are the nodes' URLs, node 0 first.
func (l *Local) RedisURLs() []string { return l.cluster.URLs() }

// Nodes is control over the Redis nodes for node recipes.
func (l *Local) Nodes() Nodes { return clusterNodes{l.cluster, l.net, l} }

// Dir is where the environment keeps its binary, database and logs.
func (l *Local) Dir() string { return l.dir }

// AppSettings are the instance settings a scenario may need changed.
type AppSettings struct {
	// Unaware turns Redlock restart awareness off.
	Unaware bool
	// LockTTL is the lease TTL; 0 means LocalConfig.LockTTL.
	LockTTL time.Duration
	// Failover makes the first node the master of a Sentinel cluster
	// (-redis-sentinel), in front of the usual nodes.
	Failover bool
}

// Settings are the settings the instances run with now.
func (l *Local) Settings() AppSettings { return l.settings }

// UnawareArgs are the flags that turn restart awareness off on its
// instances.
func (l *Local) UnawareArgs() []string { return l.cfg.UnawareArgs }

// Use restarts the instances with settings s unless they already run that
// way. The instances start in tens of milliseconds, so a scenario that needs
// other settings costs little.
//
// If the instances will not start that way (a storefront without the
// restart-awareness flag, say), they are started again as they were and the
// error is returned, then remembered so later cells do not pay for the same
// failure.
func (l *Local) Use(ctx context.Context, s AppSettings) error {
	if s.LockTTL == 0 {
		s.LockTTL = l.cfg.LockTTL
	}
	if s == l.settings {
		return nil
	}
	if err, failed := l.failed[s]; failed {
		return err
	}
	if s.Failover && l.sentinel == nil {
		sc, err := localredis.StartSentinel(ctx, localredis.SentinelOptions{Logger: l.log})
		if err != nil {
			err = fmt.Errorf("start the Sentinel cluster: %w", err)
			l.failed[s] = err
			return err
		}
		l.sentinel = sc
	}
	prev := l.settings
	l.stopApps()
	l.settings = s
	err := l.startApps(ctx)
	if err == nil {
		return nil
	}
	l.failed[s] = err
	l.settings = prev
	return errors.Join(err, l.startApps(ctx))
}

// Redis is the Redis nodes themselves, behind the network.
func (l *Local) Redis() *localredis.Cluster { return l.cluster }

// Network is the links from the instances to the nodes, for network faults.
func (l *Local) Network() *Network { return l.net }

// HistoryFiles are the instances' history files (LocalConfig.History).
func (l *Local) HistoryFiles() []string {
	var out []string
	for i := range l.cfg.Instances {
		out = append(out, filepath.Join(l.dir, fmt.Sprintf("history-app%d.jsonl", i)))
	}
	return out
}

func (l *Local) args(i int) []string {
	addr := "127.0.0.1:0"
	if i < len(l.addrs) {
		addr = l.addrs[i] // a restarted instance comes back where it was
	}
	nodes := l.net.URLs(i)
	if l.settings.Failover {
		// The Sentinel node comes first: without the last plain node,
		// Redlock still has an odd number of nodes.
		nodes = nodes[:len(nodes)-1]
	}
	args := []string{
		"-addr", addr,
		"-redis", strings.Join(nodes, ","),
		"-db", l.db(),
		"-admin-token", l.token,
	}
	if l.settings.LockTTL > 0 {
		args = append(args, "-lock-ttl", l.settings.LockTTL.String())
	}
	if l.settings.Failover {
		args = append(args, "-redis-sentinel", l.sentinel.URL())
	}
	if l.cfg.LockWait > 0 {
		args = append(args, "-lock-wait", l.cfg.LockWait.String())
	}
	if l.cfg.History {
		args = append(args, "-history", l.HistoryFiles()[i])
	}
	args = append(args, l.cfg.ExtraArgs...)
	if l.settings.Unaware {
		args = append(args, l.cfg.UnawareArgs...)
	}
	return args
}

// db is the instances' -db: LocalConfig.DB, or the SQLite file in dir.
func (l *Local) db() string {
	if l.cfg.DB != "" {
		return l.cfg.DB
	}
	return filepath.Join(l.dir, "sale.db")
}

// startApps starts the instances one after the other: the first one
// migrates the shared database alone, the others find it ready.
func (l *Local) startApps(ctx context.Context) error {
	for i := range l.cfg.Instances {
		a, err := l.startApp(ctx, i)
		if err != nil {
			l.stopApps()
			return fmt.Errorf("app instance %d: %w", i, err)
		}
		l.apps = append(l.apps, a)
		l.log.Info("app instance ready", "instance", i, "url", a.base, "pid", a.cmd.Process.Pid,
			"restart_aware", !l.settings.Unaware, "lock_ttl", l.settings.LockTTL)
	}
	return nil
}

func (l *Local) stopApps() {
	var wg sync.WaitGroup
	for _, a := range l.apps {
		wg.Go(a.stop)
	}
	wg.Wait()
	l.apps = nil
}

// Close stops the instances and the Redis nodes, and removes a temporary
// directory.
func (l *Local) Close() error {
	l.stopApps()
	var errs []error
	if l.net != nil {
		errs = append(errs, l.net.Close())
	}
	if l.cluster != nil {
		errs = append(errs, l.cluster.Stop())
	}
	if l.sentinel != nil {
		errs = append(errs, l.sentinel.Stop())
	}
	if l.tempDir {
		errs = append(errs, os.RemoveAll(l.dir))
	}
	return errors.Join(errs...)
}
