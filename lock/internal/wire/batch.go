package wire

import (
	"fmt"
	"sync"
)

// SendAll queues cmds back to back on one connection, nothing of another
// caller's between them, and calls done once, when all are answered: with
// their replies in order, or with the error of the first that got none.
func (p *Pipe) SendAll(cmds []Command, done func(replies []any, tag string, err error)) {
	var mu sync.Mutex
	replies, left, tag := make([]any, len(cmds)), len(cmds), ""
	var first error
	dones := make([]ReplyFunc, len(cmds))
	for i := range cmds {
		// The connection's reader answers in order, but a breaking
		// connection fails the rest from another goroutine meanwhile.
		dones[i] = func(v any, t string, err error) {
			mu.Lock()
			replies[i], tag, left = v, t, left-1
			if err != nil && first == nil {
				first = err
			}
			last := left == 0
			mu.Unlock()
			if last {
				done(replies, tag, first)
			}
		}
	}
	p.current().send(cmds, dones)
}

// Break fails the open connection if its handshake returned tag, so that
// the next command opens a new one and its handshake runs again: the caller
// learnt that what the handshake found no longer holds.
func (p *Pipe) Break(tag string, err error) {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	same := c.ready && c.tag == tag
	c.mu.Unlock()
	if same {
		c.fail(fmt.Errorf("node %s: %w", p.cfg.Addr, err))
	}
}
