package fast

import (
	"context"
	"time"

	"flashsale/internal/randhex"
)

// A node publishes the keyspace events the waiters wake on only if its own
// configuration says so (notify-keyspace-events with K, g and x): the lock
// never changes a server's configuration. So Listen probes each node once:
// it subscribes to a key's events, sets and deletes the key, and waits a
// moment for the delete to be heard. A node that stays silent is passed
// over when a key's events are wanted (sync), and that is logged once; with
// no node publishing, the waiters fall back to the backoff: slower, never
// wrong, since an event only ever says when to try.

// probeWait is how long a probe waits to hear its own delete.
const probeWait = time.Second

// probe finds out whether node i, listened to on s, publishes keyspace
// events. A node that does not answer tells nothing and keeps its mark.
func (w *Waker[L]) probe(ctx context.Context, i int, s subscription) {
	key := w.cfg.Namespace + "notify-probe:" + randhex.String(8)
	heard := make(chan struct{})
	w.mu.Lock()
	w.probes[key] = heard
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.probes, key)
		w.mu.Unlock()
		uctx, cancel := context.WithTimeout(w.ctx, 100*time.Millisecond)
		_ = s.ps.Unsubscribe(uctx, s.prefix+key)
		cancel()
	}()
	if !w.subscribeWithin(s, s.prefix+key, probeWait) {
		return // the node does not answer: it tells nothing
	}
	c := w.nodes[i].Client()
	if err := c.Set(ctx, key, "1", probeWait).Err(); err != nil {
		return
	}
	if err := c.Del(ctx, key).Err(); err != nil {
		return
	}
	t := time.NewTimer(probeWait)
	defer t.Stop()
	select {
	case <-heard:
		w.mute[i].Store(false)
	case <-t.C:
		w.mute[i].Store(true)
		if w.cfg.Logger != nil && !w.muteLogged[i].Swap(true) {
			w.cfg.Logger.Warn("redis node publishes no keyspace events: the speed layer's waiters on it fall back to retrying after a delay; set notify-keyspace-events to Kgx (or more) in the node's configuration",
				"node", c.Options().Addr)
		}
	case <-ctx.Done():
	}
}

// heardProbe reports whether key is a probe's, and tells the probe it was
// heard.
func (w *Waker[L]) heardProbe(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	heard, ok := w.probes[key]
	if ok {
		delete(w.probes, key)
		close(heard)
	}
	return ok
}
