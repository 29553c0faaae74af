package fast

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscription is one node's pub/sub connection and its keyspace prefix.
type subscription struct {
	ps     *redis.PubSub
	prefix string // "__keyspace@<db>__:"
}

// Listen starts hearing keyspace events and this process's line channel,
// unless it hears them already or notifications are off: a pub/sub
// connection per node (the first one subscribed to the line channel at
// once, the others only while a key's room needs them) and a goroutine
// reading each, and a probe of each node's keyspace events (probe). Rooms
// already open are subscribed again.
func (w *Waker[L]) Listen() {
	w.subMu.Lock()
	defer w.subMu.Unlock()
	if w.line == nil || w.stop != nil || w.ctx.Err() != nil {
		return
	}
	ctx, stop := context.WithCancel(w.ctx)
	w.stop = stop
	for i, n := range w.nodes {
		c := n.Client()
		sub := subscription{ps: c.Subscribe(ctx), prefix: fmt.Sprintf("__keyspace@%d__:", c.Options().DB)}
		if i == 0 {
			// This process's wake-ups from the keys' waiting lines.
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			_ = sub.ps.Subscribe(sctx, w.line.channel)
			scancel()
		}
		w.subs = append(w.subs, sub)
		w.wg.Go(func() { w.hear(ctx, sub) })
		w.wg.Go(func() { w.probe(ctx, i, sub) })
	}
	w.mu.Lock()
	open := make([]string, 0, len(w.keys))
	for key := range w.keys {
		open = append(open, key)
	}
	w.mu.Unlock()
	for _, key := range open {
		w.resync(key)
	}
}

// Quiet stops listening: every pub/sub connection closes and its goroutine
// ends. Waiters still in a room fall back to their timers.
func (w *Waker[L]) Quiet() {
	w.subMu.Lock()
	defer w.subMu.Unlock()
	if w.stop == nil {
		return
	}
	w.stop()
	w.wg.Wait()
	w.stop, w.subs = nil, nil
	clear(w.subscribed)
}

// hear reads one node's pub/sub connection until ctx ends: a key deleted or
// expired wakes its room, a message on the line channel is this process's
// turn.
func (w *Waker[L]) hear(ctx context.Context, sub subscription) {
	defer sub.ps.Close()
	ch := sub.ps.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			m, ok := msg.(*redis.Message)
			if !ok {
				if s, ok := msg.(*redis.Subscription); ok && s.Kind == "subscribe" {
					w.confirm(s.Channel)
				}
				continue
			}
			if m.Channel == w.line.channel {
				w.handoff(m.Payload, false)
				continue
			}
			key := strings.TrimPrefix(m.Channel, sub.prefix)
			if w.heardProbe(key) {
				continue
			}
			switch m.Payload {
			case "del":
				w.Deleted(key)
			case "expired", "evicted":
				w.Freed(key)
			}
		}
	}
}

// sync subscribes to the key's events on the first node that answers while a
// waiting room for it is open here, and unsubscribes once none is. Rooms open and close
// under mu, but the (un)subscribe calls run later, under subMu: so sync
// reads whether a room is open only once it holds subMu, and every open or
// close is followed by a sync. Whichever sync runs last then sees the last
// change, and a room that opens while an older one closes stays subscribed,
// whatever order the two syncs run in. A node that does not answer keeps the
// subscription (go-redis subscribes again on reconnect) and the next node is
// asked too; with every node down the waiters fall back to the backoff.
func (w *Waker[L]) sync(key string) {
	if w.beforeSync != nil {
		w.beforeSync(key)
	}
	w.subMu.Lock()
	defer w.subMu.Unlock()
	w.mu.Lock()
	r := w.keys[key]
	want := r != nil && r.listens()
	w.mu.Unlock()
	n, had := w.subscribed[key]
	if want == had {
		return
	}
	if !want {
		for _, s := range w.subs[:n] {
			ctx, cancel := context.WithTimeout(w.ctx, 100*time.Millisecond)
			_ = s.ps.Unsubscribe(ctx, s.prefix+key)
			cancel()
		}
		delete(w.subscribed, key)
		return
	}
	// The first node's events are enough: it is the single-node variants'
	// node and holds the waiting lines, and one node deleting a Redlock key
	// means its holder released it. Every event wakes every process that
	// listens, so listening to five nodes costs five wake-ups per release
	// in each waiting process: on a busy machine, CPU the holder needs. The
	// next node is asked only while the one before it does not answer; one
	// whose votes' connection is silent (wire.Pipe.Silent: frozen, cut off)
	// is not asked, which would cost the waiter the confirmation's wait,
	// nor is one that publishes no keyspace events (probe).
	for i, s := range w.subs {
		n++
		if w.nodes[i].Pipe().Silent(w.line.timeout) || w.mute[i].Load() {
			continue
		}
		if w.subscribe(s, s.prefix+key) {
			break
		}
	}
	if n > 0 { // not listening (speed layer off): Listen subscribes it later
		w.subscribed[key] = n
	}
}

// subscribe subscribes s to channel and waits, 100 ms at most, until the
// node confirms it: from then on no event of the channel is missed.
func (w *Waker[L]) subscribe(s subscription, channel string) bool {
	return w.subscribeWithin(s, channel, 100*time.Millisecond)
}

// subscribeWithin is subscribe with a wait of d at most.
func (w *Waker[L]) subscribeWithin(s subscription, channel string, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(w.ctx, d)
	defer cancel()
	done := make(chan struct{})
	w.mu.Lock()
	w.confirmed[channel] = done
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		if w.confirmed[channel] == done {
			delete(w.confirmed, channel)
		}
		w.mu.Unlock()
	}()
	if err := s.ps.Subscribe(ctx, channel); err != nil {
		return false
	}
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// confirm is a node's confirmation of a subscription to channel.
func (w *Waker[L]) confirm(channel string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if done := w.confirmed[channel]; done != nil {
		close(done)
		delete(w.confirmed, channel)
	}
}

// resync matches the key's subscription to its room off the
// caller's path, after the room's need of the key's events changed.
func (w *Waker[L]) resync(key string) {
	w.syncs.Add(1)
	go func() {
		defer w.syncs.Done()
		w.sync(key)
	}()
}
