package node

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A node's reply as a vote: a SET's OK or nil is 1 or 0, a script's integer
// is itself, and a reply of the wrong kind is an error, not a no.
func TestAnswer(t *testing.T) {
	set, script := Command{Set: true}, Command{}
	for _, tc := range []struct {
		name string
		c    Command
		v    any
		n    int64
		err  bool
	}{
		{"SET that set", set, "OK", 1, false},
		{"SET on a taken key", set, nil, 0, false},
		{"script's integer", script, int64(7), 7, false},
		{"script answered a string", script, "OK", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := answer(tc.c, tc.v, "tag", nil)
			if a.N != tc.n || (a.Err != nil) != tc.err || a.Tag != "tag" {
				t.Errorf("answer = %+v, want n=%d err=%v", a, tc.n, tc.err)
			}
		})
	}
}

// A vote whose caller gave up already is not sent: its reply comes at once,
// with the context's error.
func TestSendGivenUp(t *testing.T) {
	n := testNode(context.Background(), time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var got Answer
	n.Send(ctx, Command{Args: []string{"PING"}, Grants: true}, func(a Answer) { got = a })
	if !errors.Is(got.Err, context.Canceled) {
		t.Errorf("reply %+v, want context.Canceled", got)
	}
}
