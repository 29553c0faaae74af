package sweep

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/redisinfo"
	"flashsale/loadtest/storefront"
)

// Where the cores went.
//
// On one machine the runner, the app instances and the Redis nodes share
// the same cores, so a step's sales say little without what each used.
// With one core kept busy by other work, the runner's own share at 8000/s
// was as large as all three instances' together, and what a lock hand-off
// waits for is a core. So each step measures, over its attack, the CPU the
// instances used (from their metrics: process_cpu_seconds_total) and the
// runner's own (getrusage) and the Redis nodes' (INFO cpu), in cores: CPU
// seconds per second of the attack. What is left of the machine's cores
// went to the database and to whatever else runs there.

// Cores is the CPU used during one step's attack, in cores (CPU seconds
// per second of wall time): Apps summed over the app instances, Runner this
// load runner's own, Nodes summed over the Redis nodes (from their INFO
// cpu; 0 where a node could not say).
type Cores struct {
	Apps   float64 `json:"apps"`
	Runner float64 `json:"runner"`
	Nodes  float64 `json:"redis_nodes,omitempty"`
}

// metricsTimeout bounds a read of the instances' metrics: an instance that
// does not answer in time leaves the step without cores, not waiting.
const metricsTimeout = 10 * time.Second

// coreMeter is what the instances and the runner had used when a step's
// attack began.
type coreMeter struct {
	fleet   storefront.Fleet
	nodes   []string
	began   time.Time
	apps    float64
	ok      bool
	own     time.Duration
	redis   float64
	redisOK bool
}

// meterCores starts measuring the cores fleet, the Redis nodes at nodes
// (URLs) and this runner use.
func meterCores(ctx context.Context, fleet storefront.Fleet, nodes []string) coreMeter {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	apps, ok := appsCPU(ctx, fleet)
	redis, redisOK := nodesCPU(ctx, nodes)
	return coreMeter{fleet: fleet, nodes: nodes, began: time.Now(), apps: apps, ok: ok, own: ownCPU(), redis: redis, redisOK: redisOK}
}

// read returns the cores used since the meter began, or nil where an
// instance's CPU or the runner's could not be read (a platform that does
// not report it, an instance that does not answer).
func (m coreMeter) read(ctx context.Context) *Cores {
	own := ownCPU()
	wall := time.Since(m.began).Seconds()
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	apps, ok := appsCPU(ctx, m.fleet)
	if !m.ok || !ok || own == 0 || wall <= 0 {
		return nil
	}
	c := &Cores{Apps: (apps - m.apps) / wall, Runner: (own - m.own).Seconds() / wall}
	if redis, ok := nodesCPU(ctx, m.nodes); ok && m.redisOK {
		c.Nodes = (redis - m.redis) / wall
	}
	return c
}

// nodesCPU adds up the CPU seconds (system and user) every Redis node at
// urls has used, from INFO cpu; ok is false if any of them could not say.
func nodesCPU(ctx context.Context, urls []string) (seconds float64, ok bool) {
	if len(urls) == 0 {
		return 0, false
	}
	for _, u := range urls {
		opt, err := redis.ParseURL(u)
		if err != nil {
			return 0, false
		}
		c := redis.NewClient(opt)
		info, err := c.Info(ctx, "cpu").Result()
		c.Close()
		if err != nil {
			return 0, false
		}
		used, err := redisinfo.CPUSeconds(info)
		if err != nil {
			return 0, false
		}
		seconds += used
	}
	return seconds, true
}

// appsCPU adds up the CPU seconds every instance has used; ok is false if
// any of them could not say.
func appsCPU(ctx context.Context, fleet storefront.Fleet) (seconds float64, ok bool) {
	for _, a := range fleet {
		s, ok, err := a.CPUSeconds(ctx)
		if err != nil || !ok {
			return 0, false
		}
		seconds += s
	}
	return seconds, true
}
