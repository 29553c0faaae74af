package opfuzz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/lock"
)

// Config is what every run of a sequence shares.
type Config struct {
	// Holder builds the command of one holder process: one that runs
	// HolderMain with args (the command re-running itself, say) and
	// PasswordEnv set to Password in its environment.
	Holder func(args []string) *exec.Cmd
	// Nodes is how many nodes to start. Default 5.
	Nodes int
	// User and Password are the holders' Redis user (the app's); "" is
	// the default user.
	User, Password string
	// AdminUser and AdminPassword are the operator's. "" (with no
	// ServerArgs) starts the nodes with an admin user of the run's own,
	// so that an ACL rule on the holders' user never locks the operator
	// out; the default user then requires Password, if set.
	AdminUser, AdminPassword string
	// ServerArgs are more redis-server arguments.
	ServerArgs []string
	// AppACL starts the nodes with the app's ACL (package redisacl, the
	// default user off): the holders connect as its app user and the
	// operator as its admin, with the passwords the nodes were started
	// with; User, Password, AdminUser and AdminPassword are then ignored.
	AppACL bool
	// Keys are the keys every holder tries. Default one, "k".
	Keys []string
	// AwarenessOff starts the holders without restart awareness.
	AwarenessOff bool
	// MaxHolders is how many holder processes run at once; a new one
	// stops the oldest. Default 3.
	MaxHolders int
	// NoContender runs without the client that takes the last two nodes
	// between leases, so that leases are granted on all nodes that vote.
	NoContender bool
	// Logger gets what the runs do. Default: discarded.
	Logger *slog.Logger
	// HolderLog, if set, gets the holders' stderr: the lock's log from
	// HolderLogLevel on, and why a holder failed.
	HolderLog      io.Writer
	HolderLogLevel string
	// Signals has the holders log from info on (whatever HolderLogLevel
	// says) and every Outcome carry the run's signals, for a search that
	// steers by them.
	Signals bool
}

func (c Config) withDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = 5
	}
	if len(c.Keys) == 0 {
		c.Keys = []string{"k"}
	}
	if c.MaxHolders == 0 {
		c.MaxHolders = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// namespace is the holders' key namespace: the nodes are fresh every run.
const namespace = "opfuzz:"

// nodeArgs configure every node as the app's local nodes are (keyspace
// notifications on, no persistence but the RDB file an operator's SAVE or
// DEBUG RELOAD writes), plus what the actions need: DEBUG from loopback, a
// script answered BUSY after 100 ms, and loading slowed to 100 µs a key so
// that a restart with a few thousand keys answers LOADING for a moment.
var nodeArgs = []string{
	"--enable-debug-command", "local",
	"--busy-reply-threshold", "100",
	"--key-load-delay", "100",
	"--loading-process-events-interval-bytes", "1024",
}

// Outcome is what one run of a sequence gave.
type Outcome struct {
	Grants  []Grant       `json:"grants"`
	Doubles []DoubleGrant `json:"double_grants,omitempty"`
	// Errors are the actions that failed (a node answering BUSY to the
	// operator, say): the run goes on, as an operator's would.
	Errors []string      `json:"errors,omitempty"`
	Took   time.Duration `json:"took"`
	// Signals are what the run reached (see signals), with Config.Signals.
	Signals []string `json:"signals,omitempty"`
}

// Unsafe counts the double grants that are failures.
func (o Outcome) Unsafe() int {
	n := 0
	for _, d := range o.Doubles {
		if d.Kind == Unsafe {
			n++
		}
	}
	return n
}

// run is the state of one run of a sequence.
type run struct {
	cfg     Config
	ctx     context.Context // the run's: background work ends with it
	start   time.Time
	c       *localredis.Cluster
	admin   []*redis.Client
	holders []*holderProc
	gone    []*holderProc // stopped holders, whose grants still count
	acted   []actedAt
	born    map[int]time.Time // holder PID → when it started
	bg      sync.WaitGroup
	errs    []string
	mu      sync.Mutex
}

// Runner runs sequences, each on fresh nodes. While one runs, it starts and
// ages the nodes of the next, so that a run does not wait for its nodes to
// be old enough to vote.
type Runner struct {
	cfg     Config
	agedFor time.Duration // prepared nodes are old enough for this TTL
	ctx     context.Context
	next    *prepared
}

// prepared is a set of nodes being started and aged for the next run.
type prepared struct {
	c     *localredis.Cluster
	up    time.Time // when every node answered
	cfg   Config    // with the admin user the nodes were started with
	err   error
	ready chan struct{}
}

// NewRunner returns a Runner whose prepared nodes are old enough for
// leases of agedFor; ctx bounds the nodes it prepares. Close it.
func NewRunner(ctx context.Context, cfg Config, agedFor time.Duration) *Runner {
	return &Runner{cfg: cfg.withDefaults(), ctx: ctx, agedFor: agedFor}
}

// Close stops the nodes prepared for a run that did not come.
func (rn *Runner) Close() {
	if p := rn.next; p != nil {
		rn.next = nil
		<-p.ready
		if p.c != nil {
			_ = p.c.Stop()
		}
	}
}

func (rn *Runner) prepare() *prepared {
	p := &prepared{cfg: rn.cfg, ready: make(chan struct{})}
	go func() {
		defer close(p.ready)
		cfg := &p.cfg
		args := append(append([]string{}, nodeArgs...), cfg.ServerArgs...)
		password := ""
		if cfg.AdminUser == "" && len(cfg.ServerArgs) == 0 && !cfg.AppACL {
			cfg.AdminUser, cfg.AdminPassword = "opfuzz-admin", randomPassword()
			args = append(args, "--user", cfg.AdminUser, "on", ">"+cfg.AdminPassword, "~*", "&*", "+@all")
			password = cfg.Password
		}
		p.c, p.err = localredis.Start(rn.ctx, cfg.Nodes, localredis.Options{Args: args, Logger: cfg.Logger, Password: password, ACL: cfg.AppACL})
		p.up = time.Now()
		if p.err != nil {
			return
		}
		if cfg.AppACL {
			if cfg.User, cfg.Password, p.err = userOf(p.c.URLs()[0]); p.err != nil {
				return
			}
			if cfg.AdminUser, cfg.AdminPassword, p.err = userOf(p.c.AdminURLs()[0]); p.err != nil {
				return
			}
		}
		if cfg.AwarenessOff {
			return
		}
		p.err = p.age(rn.ctx, rn.agedFor)
	}()
	return p
}

// age waits until the nodes are old enough to vote for leases of ttl: the
// lock's MinUptime and a second more since they answered, which needs no
// user on them (an ACL file may leave the default user off).
func (p *prepared) age(ctx context.Context, ttl time.Duration) error {
	sleep(ctx, time.Until(p.up.Add(lock.MinUptime(ttl)+time.Second)))
	return ctx.Err()
}

// Run runs seq once on fresh nodes and judges the grants. ctx bounds it:
// when it ends every process the run started is stopped by its PID.
func (rn *Runner) Run(ctx context.Context, seq Sequence) (Outcome, error) {
	start := time.Now()
	p := rn.next
	if p == nil {
		p = rn.prepare()
	}
	rn.next = rn.prepare()
	select {
	case <-p.ready:
	case <-ctx.Done():
		go func() {
			<-p.ready
			if p.c != nil {
				_ = p.c.Stop()
			}
		}()
		return Outcome{}, ctx.Err()
	}
	if p.c != nil {
		defer func() { _ = p.c.Stop() }()
	}
	if p.err != nil {
		return Outcome{}, fmt.Errorf("start nodes: %w", p.err)
	}
	maxTTL := time.Second
	for _, a := range seq {
		if a.Op == "holder" {
			maxTTL = max(maxTTL, a.D)
		}
	}
	if maxTTL > rn.agedFor && !p.cfg.AwarenessOff {
		if err := p.age(ctx, maxTTL); err != nil {
			return Outcome{}, err
		}
	}
	cfg, c := p.cfg, p.c
	start = time.Now() // the nodes are ready: the run's clock starts
	r := &run{cfg: cfg, c: c, start: start, born: map[int]time.Time{}}
	for _, a := range c.Addrs() {
		r.admin = append(r.admin, redis.NewClient(&redis.Options{
			Addr: a, Username: cfg.AdminUser, Password: cfg.AdminPassword,
			MaxRetries: -1, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		}))
	}
	defer func() {
		for _, a := range r.admin {
			_ = a.Close()
		}
	}()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.ctx = runCtx
	defer r.stopHolders()
	if !cfg.NoContender {
		r.contend()
	}
	for i, a := range seq {
		if runCtx.Err() != nil {
			break
		}
		r.acted = append(r.acted, actedAt{at: time.Now(), a: a})
		actCtx, done := context.WithTimeout(runCtx, 30*time.Second)
		err := r.act(actCtx, a)
		done()
		if err != nil {
			r.note(fmt.Sprintf("%d %s: %v", i, a, err))
		}
	}
	// A lease granted after the last action can be the second holder.
	sleep(runCtx, maxTTL+time.Second)
	cancel()
	r.bg.Wait()
	r.stopHolders()
	var out Outcome
	for _, p := range r.gone {
		out.Grants = append(out.Grants, p.reader.all()...)
	}
	for _, g := range out.Grants {
		cfg.Logger.Debug("opfuzz: grant", "pid", g.PID, "variant", g.Variant, "ttl", g.TTL, "token", g.Token,
			"acquired", time.Unix(0, g.Acquired).Sub(start).Round(time.Millisecond),
			"end", time.Unix(0, g.End()).Sub(start).Round(time.Millisecond))
	}
	out.Doubles = Check(out.Grants)
	if cfg.Signals {
		var logs [][]byte
		for _, p := range r.gone {
			logs = append(logs, p.stderr.Bytes())
		}
		out.Signals = signals(logs, out.Grants, out.Doubles, r.acted, r.born, c.Addrs())
	}
	out.Errors = r.errs
	out.Took = time.Since(start)
	return out, ctx.Err()
}

// userOf is the user and password of a node's URL.
func userOf(nodeURL string) (user, password string, err error) {
	u, err := url.Parse(nodeURL)
	if err != nil {
		return "", "", err
	}
	password, ok := u.User.Password()
	if !ok {
		return "", "", fmt.Errorf("%s names no password", u.Redacted())
	}
	return u.User.Username(), password, nil
}

// randomPassword is the run's own admin password.
func randomPassword() string {
	return strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
}

func (r *run) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, s)
	r.cfg.Logger.Debug("opfuzz: action failed", "err", s)
}

// startHolder starts a holder of variant with ttl, stopping the oldest
// holder beyond MaxHolders.
func (r *run) startHolder(variant string, ttl time.Duration) error {
	h := HolderConfig{
		Addrs: r.c.Addrs(), User: r.cfg.User, Namespace: namespace, Variant: variant,
		TTL: ttl, Keys: r.cfg.Keys, AwarenessOff: r.cfg.AwarenessOff,
	}
	if r.cfg.HolderLog != nil {
		h.LogLevel = r.cfg.HolderLogLevel
	}
	if r.cfg.Signals && (h.LogLevel == "" || h.LogLevel == "warn" || h.LogLevel == "error") {
		h.LogLevel = "info"
	}
	cmd := r.cfg.Holder(h.args())
	if r.cfg.AppACL {
		// The nodes' own password: the last value of a key in Env wins.
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, PasswordEnv+"="+r.cfg.Password)
	}
	began := time.Now()
	p, err := startHolder(cmd, r.cfg.HolderLog, ttl+10*time.Second)
	if p != nil {
		r.born[p.cmd.Process.Pid] = began
		r.holders = append(r.holders, p)
	}
	for len(r.holders) > r.cfg.MaxHolders {
		r.stopOne()
	}
	return err
}

// stopOne stops the oldest holder.
func (r *run) stopOne() {
	p := r.holders[0]
	r.holders = r.holders[1:]
	if err := p.stop(3 * time.Second); err != nil {
		r.cfg.Logger.Debug("opfuzz: holder stopped", "pid", p.cmd.Process.Pid, "err", err)
	}
	r.gone = append(r.gone, p)
}

// stopHolders stops every holder still running (it is safe to call twice).
func (r *run) stopHolders() {
	for len(r.holders) > 0 {
		r.stopOne()
	}
}

// errNoHolder is a holder action on a run whose Config builds no command.
var errNoHolder = errors.New("opfuzz: Config.Holder is not set")
