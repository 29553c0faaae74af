package loadtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Network is the links between the app instances and the Redis nodes: one
// toxiproxy proxy (github.com/Shopify/toxiproxy/v2, embedded as a library)
// per instance and node, all on loopback, so a fault can hit one instance's
// view of one node and nothing else — a delay on instance 1's replies, a
// partition where instance 0 reaches nodes 0–2 and instance 1 nodes 2–4.
//
// The proxies also do what a relay of the runner did before: a go-redis client
// that met as many refused dials as its pool size stops dialling and probes
// the node once a second, so a node back after 50 ms would stay out of its
// reach for up to a second, and the node-restart scenario would measure that
// back-off rather than the lock. A proxy always accepts; while the node is
// down it fails to dial it and closes the client's connection at once (a
// dead connection, not a refused dial, so the client keeps trying), and the
// first connection after the node is back reaches it.
type Network struct {
	server  *toxiproxy.ApiServer
	proxies [][]*toxiproxy.Proxy // [instance][node]

	mu     sync.Mutex
	toxics map[*toxiproxy.Proxy][]string // toxics in place, by proxy
}

// StartNetwork starts a proxy on a free loopback port for every instance
// and every node address in upstreams.
func StartNetwork(instances int, upstreams []string) (*Network, error) {
	n := &Network{
		server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		toxics: map[*toxiproxy.Proxy][]string{},
	}
	for i := range instances {
		var row []*toxiproxy.Proxy
		for j, up := range upstreams {
			if err := loopbackURL("http://" + up); err != nil {
				n.Close()
				return nil, err
			}
			p := toxiproxy.NewProxy(n.server, fmt.Sprintf("app%d-node%d", i, j), "127.0.0.1:0", up)
			if err := n.server.Collection.Add(p, true); err != nil {
				n.Close()
				return nil, fmt.Errorf("proxy instance %d → node %d: %w", i, j, err)
			}
			row = append(row, p)
		}
		n.proxies = append(n.proxies, row)
	}
	return n, nil
}

// Addr is where instance i reaches node j ("127.0.0.1:port").
func (n *Network) Addr(i, j int) string { return n.proxies[i][j].Listen }

// URLs are the nodes as instance i sees them.
func (n *Network) URLs(i int) []string {
	out := make([]string, len(n.proxies[i]))
	for j := range out {
		out[j] = "redis://" + n.Addr(i, j)
	}
	return out
}

// Delay holds every reply from nodes to instance i for d (± jitter) until
// Heal: a slow network, or with d past the lease TTL a reply that arrives
// after the lease it grants has run out.
func (n *Network) Delay(i int, nodes []int, d, jitter time.Duration) error {
	return n.add(i, nodes, "delay", fmt.Sprintf(`{"name":"delay","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`,
		d.Milliseconds(), jitter.Milliseconds()))
}

// Cut drops everything between instance i and the nodes, both ways, until
// Heal; connections stay open (a partition does not say it is one) and are
// closed when it heals.
func (n *Network) Cut(i int, nodes []int) error {
	return errors.Join(
		n.add(i, nodes, "cut-up", `{"name":"cut-up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`),
		n.add(i, nodes, "cut-down", `{"name":"cut-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`))
}

func (n *Network) add(i int, nodes []int, name, spec string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for _, j := range nodes {
		p := n.proxies[i][j]
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			errs = append(errs, fmt.Errorf("%s on instance %d → node %d: %w", name, i, j, err))
			continue
		}
		n.toxics[p] = append(n.toxics[p], name)
	}
	return errors.Join(errs...)
}

// Heal removes every toxic: the network is as it was.
func (n *Network) Heal(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for p, names := range n.toxics {
		for _, name := range names {
			if err := p.Toxics.RemoveToxic(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("%s on %s: %w", name, p.Name, err))
			}
		}
		delete(n.toxics, p)
	}
	return errors.Join(errs...)
}

// Close stops every proxy and its connections.
func (n *Network) Close() error {
	_ = n.Heal(context.Background()) // the proxies are going anyway
	return n.server.Collection.Clear()
}
