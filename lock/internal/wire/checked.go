package wire

import "sync"

// CheckedFunc receives what a node answered to a checked command (v) and to
// the checks that followed it on the connection (checks, in order), with
// the connection's tag; err is set when any of them got no answer.
type CheckedFunc func(v any, checks []any, tag string, err error)

// SendChecked queues cmd with checks after it, on one connection: the
// checks' replies tell the caller something about the node as it was after
// cmd ran. Checked commands queued back to back and not yet written, with
// checks given as the same slice, share one set of checks, moved behind the last of them, so a batch of votes
// written together costs the node one set of checks, not one per vote;
// what the checks read still comes after every command they answer for.
// done is called once, when cmd and its checks are answered.
func (p *Pipe) SendChecked(cmd Command, checks []Command, done CheckedFunc) {
	p.current().sendChecked(cmd, checks, done)
}

// appendCmds appends cmds to out and their waiting places to the queue.
// Called with mu held.
func (c *pipeConn) appendCmds(cmds []Command, dones []ReplyFunc) {
	for i, cmd := range cmds {
		c.out = AppendCommand(c.out, cmd.Args...)
		c.queue = append(c.queue, waiting{done: dones[i], want: cmd.Want})
	}
	c.unwritten += len(cmds)
}

func (c *pipeConn) sendChecked(cmd Command, checks []Command, done CheckedFunc) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		done(nil, nil, "", err)
		return
	}
	g := c.checked
	if g != nil && sameChecks(g.cmds, checks) {
		// The shared check is the unwritten tail: take it off, to put it
		// back behind cmd.
		c.out = c.out[:c.checkAt]
		c.queue = c.queue[:len(c.queue)-len(checks)]
		c.unwritten -= len(checks)
	} else {
		g = &sharedCheck{cmds: checks, replies: make([]any, len(checks))}
	}
	m := g.join(done)
	c.appendCmds([]Command{cmd}, []ReplyFunc{func(v any, _ string, err error) { g.answered(m, v, err) }})
	c.checkAt = len(c.out)
	dones := make([]ReplyFunc, len(checks))
	for i := range checks {
		dones[i] = func(v any, tag string, err error) { g.checkAnswered(i, v, tag, err) }
	}
	c.appendCmds(checks, dones)
	c.checked = g
	c.flush()
}

// sameChecks: checks given as the same slice are the same checks.
func sameChecks(a, b []Command) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sharedCheck is one set of checks and the checked commands it answers
// for. Its members' replies come before its own, in order; a connection
// that breaks may answer the rest from another goroutine meanwhile, so it
// hands everything over only once every reply or error is in.
type sharedCheck struct {
	cmds []Command

	mu      sync.Mutex
	members []checkMember
	replies []any
	tag     string
	err     error // the first error of the checks
	left    int   // replies and errors still to come
}

type checkMember struct {
	done CheckedFunc
	v    any
	err  error
}

// join adds a checked command whose reply is still to come, and returns its
// place. Called with the connection's mu held, before the check is written.
func (g *sharedCheck) join(done CheckedFunc) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.members) == 0 {
		g.left = len(g.cmds)
	}
	g.members = append(g.members, checkMember{done: done})
	g.left++
	return len(g.members) - 1
}

func (g *sharedCheck) answered(m int, v any, err error) {
	g.mu.Lock()
	g.members[m].v, g.members[m].err = v, err
	g.settle()
}

func (g *sharedCheck) checkAnswered(i int, v any, tag string, err error) {
	g.mu.Lock()
	g.replies[i], g.tag = v, tag
	if err != nil && g.err == nil {
		g.err = err
	}
	g.settle()
}

// settle counts one reply in, and once all are in, hands each member its
// own reply and the checks'. Called with g.mu held; releases it.
func (g *sharedCheck) settle() {
	g.left--
	if g.left > 0 {
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	for _, m := range g.members {
		err := m.err
		if err == nil {
			err = g.err
		}
		m.done(m.v, g.replies, g.tag, err)
	}
}
