package opfuzz

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// act runs one action. Actions on a node go through the operator's admin
// connection to it; a failure is returned and the run goes on.
func (r *run) act(ctx context.Context, a Action) error {
	r.cfg.Logger.Debug("opfuzz: act", "action", a.String(), "at", time.Since(r.start).Round(time.Millisecond))
	if a.Op == "wait" {
		sleep(ctx, a.D)
		return nil
	}
	if a.Op == "holder" {
		if r.cfg.Holder == nil {
			return errNoHolder
		}
		return r.startHolder(a.Arg, a.D)
	}
	if a.Op == "stop" {
		if len(r.holders) > 0 {
			r.stopOne()
		}
		return nil
	}
	adm := r.admin[a.Node]
	do := func(args ...any) error { return adm.Do(ctx, args...).Err() }
	switch a.Op {
	case "flushall":
		return do("FLUSHALL")
	case "flushdb":
		return do("FLUSHDB")
	case "swapdb":
		if err := do("SWAPDB", "0", "1"); err != nil {
			return err
		}
		sleep(ctx, a.D)
		return do("SWAPDB", "0", "1")
	case "evict":
		return r.evict(ctx, adm, a.Arg)
	case "resetstat":
		return do("CONFIG", "RESETSTAT")
	case "acl":
		return do("ACL", "SETUSER", r.holderUser(), a.Arg)
	case "save":
		return do("SAVE")
	case "restart":
		return r.c.Nodes[a.Node].Restart(ctx, a.Arg == "keep")
	case "reload":
		if a.Arg == "nosave" {
			return do("DEBUG", "RELOAD", "NOSAVE")
		}
		return do("DEBUG", "RELOAD")
	case "scriptflush":
		return do("SCRIPT", "FLUSH")
	case "clientkill":
		return do("CLIENT", "KILL", "TYPE", "normal")
	case "busy":
		return r.busy(ctx, a.Node, a.D)
	case "loading":
		return r.loading(ctx, a.Node)
	}
	return fmt.Errorf("unknown op %q", a.Op)
}

// holderUser is the Redis user the holders connect as.
func (r *run) holderUser() string {
	if r.cfg.User == "" {
		return "default"
	}
	return r.cfg.User
}

// lockKey is the Redis key of the lock named name.
func lockKey(name string) string { return namespace + "lock:" + name }

// contenderNodes is how many nodes the contender takes: the last ones.
const contenderNodes = 2

// contend starts a client that, until the run ends, takes every key on the
// last two nodes for 300 ms whenever no other node holds it (between two
// leases), as a Redlock client that lost a race holds its minority until
// its release or its TTL: the next lease is then granted on a bare quorum
// of the other nodes (the case in which one node that forgets a key is a
// second holder), and the last two are free again while it is held.
func (r *run) contend() {
	var mine, others []*redis.Client
	for i, n := range r.c.Nodes {
		c := redis.NewClient(&redis.Options{
			Addr: n.Addr(), Username: r.cfg.User, Password: r.cfg.Password,
			MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond,
		})
		if i >= len(r.c.Nodes)-contenderNodes {
			mine = append(mine, c)
		} else {
			others = append(others, c)
		}
	}
	free := func(key string) bool {
		for _, c := range others {
			if n, err := c.Exists(r.ctx, key).Result(); err == nil && n > 0 {
				return false
			}
		}
		return true
	}
	r.bg.Go(func() {
		defer func() {
			for _, c := range slices.Concat(mine, others) {
				_ = c.Close()
			}
		}()
		for r.ctx.Err() == nil {
			took := false
			for _, k := range r.cfg.Keys {
				if !free(lockKey(k)) {
					continue
				}
				for _, c := range mine {
					if ok, _ := c.SetNX(r.ctx, lockKey(k), "opfuzz-contender", 300*time.Millisecond).Result(); ok {
						took = true
					}
				}
			}
			if took {
				sleep(r.ctx, 300*time.Millisecond)
				continue
			}
			sleep(r.ctx, time.Millisecond)
		}
	})
}

// evict sets a memory limit just above what the node uses and policy, then
// writes long-lived keys until no lock key is left on the node (at least a
// few, at most a bounded number), and sets noeviction back.
func (r *run) evict(ctx context.Context, adm *redis.Client, policy string) error {
	info, err := adm.Info(ctx, "memory").Result()
	if err != nil {
		return err
	}
	var used int64
	for row := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(row, "used_memory:"); ok {
			used, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	for _, kv := range [][2]string{{"maxmemory", strconv.FormatInt(used+2<<20, 10)}, {"maxmemory-policy", policy}} {
		if err := adm.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return err
		}
	}
	fill := strings.Repeat("x", 16<<10)
	var werr error
	for n := 0; n < 3000; n++ {
		if n >= 50 && r.noLockKey(ctx, adm) {
			break
		}
		if werr = adm.Set(ctx, "opfuzz-fill:"+strconv.Itoa(n), fill, time.Hour).Err(); werr != nil {
			break
		}
	}
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "0"}} {
		if err := adm.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return err
		}
	}
	iter := adm.Scan(ctx, 0, "opfuzz-fill:*", 1000).Iterator()
	for iter.Next(ctx) {
		_ = adm.Unlink(ctx, iter.Val()).Err()
	}
	return werr
}

func (r *run) noLockKey(ctx context.Context, adm *redis.Client) bool {
	for _, k := range r.cfg.Keys {
		if n, err := adm.Exists(ctx, lockKey(k)).Result(); err != nil || n > 0 {
			return false
		}
	}
	return true
}

// busy runs a script on node i that loops for d (the node answers BUSY to
// everyone else once it passed the threshold), and returns once it does.
func (r *run) busy(ctx context.Context, i int, d time.Duration) error {
	looper := redis.NewClient(&redis.Options{
		Addr: r.c.Nodes[i].Addr(), Username: r.cfg.AdminUser, Password: r.cfg.AdminPassword,
		ReadTimeout: -1, MaxRetries: -1,
	})
	started := make(chan struct{})
	r.bg.Go(func() {
		defer looper.Close()
		ended := make(chan struct{})
		go func() {
			close(started)
			_ = looper.Eval(context.Background(), "while true do end", nil).Err()
			close(ended)
		}()
		<-started
		sleep(r.ctx, d)
		// SCRIPT KILL until the script is gone (its first may come before
		// the node took it for busy), for 10 s at most: then the looper's
		// connection is closed, and the node is stopped with the run.
		for range 200 {
			_ = r.admin[i].Do(context.Background(), "SCRIPT", "KILL").Err()
			select {
			case <-ended:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		r.note(fmt.Sprintf("busy %d: the script outlived 10 s of SCRIPT KILL", i))
	})
	<-started
	return r.waitAnswer(ctx, i, "BUSY")
}

// loading writes a few thousand keys into database 9 of node i, saves, and
// restarts it from that file; it returns once the node answers LOADING.
func (r *run) loading(ctx context.Context, i int) error {
	filler := redis.NewClient(&redis.Options{
		Addr: r.c.Nodes[i].Addr(), Username: r.cfg.AdminUser, Password: r.cfg.AdminPassword, DB: 9,
	})
	defer filler.Close()
	pipe := filler.Pipeline()
	for n := range 15000 {
		pipe.Set(ctx, "opfuzz-load:"+strconv.Itoa(n), n, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	if err := filler.Save(ctx).Err(); err != nil {
		return err
	}
	r.bg.Go(func() {
		ctx, done := context.WithTimeout(r.ctx, 30*time.Second)
		defer done()
		if err := r.c.Nodes[i].Restart(ctx, true); err != nil {
			r.note(fmt.Sprintf("loading %d: restart: %v", i, err))
		}
	})
	return r.waitAnswer(ctx, i, "LOADING")
}

// waitAnswer waits, at most a few seconds, until node i answers PING with
// an error that starts with code.
func (r *run) waitAnswer(ctx context.Context, i int, code string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := r.admin[i].Ping(ctx).Err()
		if err != nil && strings.HasPrefix(err.Error(), code) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("node %d never answered %s: %v", i, code, err)
		}
		sleep(ctx, 5*time.Millisecond)
	}
}
