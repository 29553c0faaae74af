package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/localredis"
	"flashsale/internal/redisacl"
	"flashsale/lock"
)

// redisNodes parses -redis, or starts local nodes when it is empty; stop
// stops the nodes it started (and does nothing for nodes given by URL). On
// in-process nodes it turns restart awareness off in cfg: they cannot tell
// their incarnation or their data's age, and they live and die with this
// process.
func redisNodes(ctx context.Context, cfg *config, log *slog.Logger) (opts []*redis.Options, urls []string, stop func(), err error) {
	if cfg.redis != "" || cfg.sentinel != nil {
		for _, u := range strings.Split(cfg.redis, ",") {
			if u = strings.TrimSpace(u); u == "" {
				continue
			}
			o, err := redis.ParseURL(u)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("-redis: %w", err)
			}
			opts, urls = append(opts, o), append(urls, u)
		}
		if len(opts) == 0 && cfg.sentinel == nil {
			return nil, nil, nil, errors.New("-redis: no URL given")
		}
		return opts, urls, func() {}, nil
	}
	// The app connects as the ACL's restricted user: it cannot flush,
	// reconfigure or demote a node (package redisacl).
	cluster, err := localredis.Start(ctx, cfg.localNodes, localredis.Options{Logger: log, AOF: cfg.localAOF, AppendFsync: cfg.localFsync, ACL: true})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start local Redis nodes: %w", err)
	}
	kind := "redis-server processes; the app connects as Redis user " + redisacl.AppUser + ", which cannot run admin commands"
	if cluster.InProcess() {
		kind = "in-process (miniredis) nodes, without an ACL (the app may run any command) and without restart awareness (they cannot tell their incarnation, and stop with this process); install redis-server for real ones"
		cfg.restartAware = false
	}
	log.Info("no -redis given: started local Redis nodes", "kind", kind, "addrs", strings.Join(cluster.Addrs(), ","))
	if cfg.restartAware && !cluster.InProcess() {
		// Restart awareness keeps a node out of Redlock's quorums until its
		// uptime reaches the TTL: a node cannot tell a first start from a
		// restart that lost its data. Serve once they can vote.
		age := lock.MinUptime(cfg.lockTTL)
		log.Info("new Redis nodes sit out their first lock TTL before they vote; waiting", "for", age)
		actx, cancel := context.WithTimeout(ctx, age+10*time.Second)
		err := cluster.Aged(actx, age)
		cancel()
		if err != nil {
			return nil, nil, nil, errors.Join(fmt.Errorf("local Redis nodes: %w", err), cluster.Stop())
		}
	}
	for _, u := range cluster.URLs() {
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, nil, nil, errors.Join(err, cluster.Stop())
		}
		opts = append(opts, o)
	}
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	keepUp(keepCtx, cluster, log)
	return opts, cluster.URLs(), func() {
		stopKeeping()
		if err := cluster.Stop(); err != nil {
			log.Warn("stopping local Redis nodes", "err", err)
		}
	}, nil
}

// keepUp starts a local node that died (a kill -9, as in the persistence
// lab) again on its own port and data directory, as a service manager
// would: with -local-aof it comes back with the keys its file holds,
// without it empty, and restart awareness keeps it out of quorums for a
// TTL either way. It stops when ctx ends, before the cluster is stopped.
func keepUp(ctx context.Context, cluster *localredis.Cluster, log *slog.Logger) {
	for _, n := range cluster.Nodes {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-n.Exited():
				}
				if ctx.Err() != nil {
					return
				}
				log.Warn("local Redis node exited; starting it again on its own files", "node", n.Index(), "addr", n.Addr())
				if err := n.Start(ctx); err != nil {
					log.Error("local Redis node did not come back", "node", n.Index(), "err", err)
					return
				}
			}
		}()
	}
}

// nodeClients are the application's own clients of the lockers' nodes, first
// node first (the Sentinel-managed master, when there is one), for the live
// stream's publishing and the redis-stock design's stock. They speak as the
// lockers' clients do: RESP2 without CLIENT SETINFO (what the app's Redis
// user is allowed), and a context's deadline bounds a command on the wire.
func nodeClients(nodes []*redis.Options, sentinel *redis.FailoverOptions) []*redis.Client {
	var out []*redis.Client
	if sentinel != nil {
		fo := *sentinel
		fo.Protocol, fo.DisableIdentity, fo.ContextTimeoutEnabled = 2, true, true
		out = append(out, redis.NewFailoverClient(&fo))
	}
	for _, o := range nodes {
		cp := *o
		cp.Protocol, cp.DisableIdentity, cp.ContextTimeoutEnabled = 2, true, true
		out = append(out, redis.NewClient(&cp))
	}
	return out
}
