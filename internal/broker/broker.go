// Package broker carries the storefront's live changes (stock and seats)
// between instances over Redis pub/sub, and hands them to the local
// streams of each instance.
package broker

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Broker carries stock and seat changes between instances: a change is
// published on one Redis node (the first that answers) and every instance
// subscribes on every node, so a sale on instance B reaches a page served
// by instance A whichever node carried it. Delivery is best effort: a live
// page is a view, the database is the record.
type Broker struct {
	nodes   []*redis.Client
	channel string
	log     *slog.Logger
	dropped func()

	out chan []byte // changes waiting to be published; the publisher owns the Redis side

	mu     sync.Mutex
	subs   map[chan []byte]struct{}
	closed bool
}

// publishTimeout bounds one node's PUBLISH, so a paused node delays the
// live stream by at most this much before the next node is tried.
const publishTimeout = 250 * time.Millisecond

// New returns a broker on the channel namespace+"events". onDrop, if
// not nil, is called for every change a stream missed (Metrics.StreamDropped).
func New(nodes []*redis.Client, namespace string, log *slog.Logger, onDrop func()) *Broker {
	if log == nil {
		log = slog.Default()
	}
	if onDrop == nil {
		onDrop = func() {}
	}
	return &Broker{
		nodes: nodes, channel: namespace + "events", log: log, dropped: onDrop,
		out:  make(chan []byte, 1024),
		subs: map[chan []byte]struct{}{},
	}
}

// Channel is the Redis pub/sub channel the broker uses.
func (b *Broker) Channel() string { return b.channel }

// Publish queues a change, sent as its JSON, for every instance's streams.
// It never blocks and never fails the sale that made the change: a full
// queue drops it, and so does one that does not marshal.
func (b *Broker) Publish(change any) {
	msg, err := json.Marshal(change)
	if err != nil {
		return
	}
	select {
	case b.out <- msg:
	default:
		b.dropped()
	}
}

// Run publishes queued changes and relays every node's messages to the
// local streams until ctx is done; then it closes every stream.
func (b *Broker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { b.publish(ctx) })
	for _, n := range b.nodes {
		wg.Go(func() { b.relay(ctx, n) })
	}
	wg.Wait()
	b.CloseStreams()
}

// publish sends each queued change to the first node that takes it, starting
// from the one that worked last.
func (b *Broker) publish(ctx context.Context) {
	preferred := 0
	for {
		var msg []byte
		select {
		case <-ctx.Done():
			return
		case msg = <-b.out:
		}
		var err error
		for i := range b.nodes {
			idx := (preferred + i) % len(b.nodes)
			pctx, cancel := context.WithTimeout(ctx, publishTimeout)
			err = b.nodes[idx].Publish(pctx, b.channel, msg).Err()
			cancel()
			if err == nil {
				preferred = idx
				break
			}
		}
		if err != nil {
			b.dropped()
			b.log.Warn("live change not published: no Redis node answered", "err", err)
		}
	}
}

// relay forwards one node's messages; go-redis resubscribes by itself after
// the node comes back.
func (b *Broker) relay(ctx context.Context, node *redis.Client) {
	ps := node.Subscribe(ctx, b.channel)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			b.fanOut([]byte(m.Payload))
		}
	}
}

// fanOut hands a message to every local stream. A stream whose buffer is
// full misses it rather than slow everyone else down.
func (b *Broker) fanOut(msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		select {
		case s <- msg:
		default:
			b.dropped()
		}
	}
}

// Subscribe opens a local stream. The channel is closed when the broker
// closes its streams (shutdown); cancel leaves early.
func (b *Broker) Subscribe() (msgs <-chan []byte, cancel func()) {
	ch := make(chan []byte, 64)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(ch)
		return ch, func() {}
	}
	b.subs[ch] = struct{}{}
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	}
}

// CloseStreams ends every local stream and refuses new ones. The server
// calls it when shutdown begins, so long-lived streams do not hold the
// graceful shutdown open.
func (b *Broker) CloseStreams() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		delete(b.subs, s)
		close(s)
	}
}
