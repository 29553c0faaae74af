package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"flashsale/loadtest/storefront"

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
	proxies [][]*toxiproxy.Proxy // [instance][node], replaced under mu
	addrs   [][]string           // their listen addresses, which never change

	mu     sync.Mutex
	faulty map[[2]int]bool // [instance, node] links that carry toxics
}

// StartNetwork starts a proxy on a free loopback port for every instance
// and every node address in upstreams.
func StartNetwork(instances int, upstreams []string) (*Network, error) {
	n := &Network{
		server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		faulty: map[[2]int]bool{},
	}
	for i := range instances {
		var row []*toxiproxy.Proxy
		var addrs []string
		for j, up := range upstreams {
			if err := storefront.Loopback("http://" + up); err != nil {
				n.Close()
				return nil, err
			}
			addr, err := quietPort()
			if err != nil {
				n.Close()
				return nil, err
			}
			p := toxiproxy.NewProxy(n.server, fmt.Sprintf("app%d-node%d", i, j), addr, up)
			if err := n.server.Collection.Add(p, true); err != nil {
				n.Close()
				return nil, fmt.Errorf("proxy instance %d → node %d: %w", i, j, err)
			}
			row = append(row, p)
			addrs = append(addrs, p.Listen)
		}
		n.proxies = append(n.proxies, row)
		n.addrs = append(n.addrs, addrs)
	}
	return n, nil
}

// Instances is how many instances the network links.
func (n *Network) Instances() int { return len(n.addrs) }

// Addr is where instance i reaches node j ("127.0.0.1:port").
func (n *Network) Addr(i, j int) string { return n.addrs[i][j] }

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
	return n.fault(i, nodes, fmt.Sprintf(`{"name":"delay","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`,
		d.Milliseconds(), jitter.Milliseconds()))
}

// Cut drops everything between instance i and the nodes, both ways, until
// Heal: a connection opens, but nothing it carries arrives.
func (n *Network) Cut(i int, nodes []int) error {
	return n.fault(i, nodes,
		`{"name":"cut-up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`,
		`{"name":"cut-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
}

// fault adds the given toxics to the links from instance i to nodes, in
// place: the connections through them stay open and are slowed or cut as
// they are, as a network that changes under them would do.
//
// Toxics are never removed from a proxy with live connections: in
// toxiproxy v2.5.0 removing a latency toxic from a link whose reader has
// stopped waits for that link for ever, and Heal would never return. Heal
// replaces the proxy instead (swap).
func (n *Network) fault(i int, nodes []int, toxics ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for _, j := range nodes {
		p := n.proxies[i][j]
		for _, spec := range toxics {
			// A link the other nemesis lane has cut already is cut: two
			// faults may share it, and the first heal ends both.
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil && !errors.Is(err, toxiproxy.ErrToxicAlreadyExists) {
				errs = append(errs, fmt.Errorf("instance %d → node %d: %w", i, j, err))
			}
		}
		n.faulty[[2]int{i, j}] = true
	}
	return errors.Join(errs...)
}

// swap replaces proxy [i][j] by a plain new one on the same address. The
// old one's connections are closed, as the end of a partition breaks
// them; clients reconnect at once.
func (n *Network) swap(i, j int) error {
	old := n.proxies[i][j]
	if err := n.server.Collection.Remove(old.Name); err != nil && !errors.Is(err, toxiproxy.ErrProxyNotFound) {
		return fmt.Errorf("instance %d → node %d: %w", i, j, err)
	}
	p := toxiproxy.NewProxy(n.server, old.Name, n.addrs[i][j], old.Upstream)
	n.proxies[i][j] = p // even if it fails to start: the next swap tries again
	// The address was ours a moment ago; only a process binding that very
	// port could take it in between (quietPort keeps outgoing connections
	// away from it), so a few tries are plenty.
	var err error
	for try := 0; try < 50; try++ {
		if err = n.server.Collection.Add(p, true); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("instance %d → node %d: %w", i, j, err)
	}
	delete(n.faulty, [2]int{i, j})
	return nil
}

// Heal puts plain links back wherever a fault is: the network is as it was.
func (n *Network) Heal(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for ij := range n.faulty { // swap deletes the current key: allowed while ranging
		if err := n.swap(ij[0], ij[1]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// quietPort finds a free loopback port below the kernel's ephemeral range
// (32768 and up on Linux), where no outgoing connection is ever given a
// source port: a proxy that closes its listener to be replaced gets the
// port back, instead of finding it taken by some connection's local end.
func quietPort() (string, error) {
	for try := 0; try < 200; try++ {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		if err := ln.Close(); err != nil {
			return "", err
		}
		return addr, nil
	}
	return "", errors.New("no free loopback port below the ephemeral range")
}

// Close stops every proxy and its connections.
func (n *Network) Close() error {
	return n.server.Collection.Clear()
}
