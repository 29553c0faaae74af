package lock_test

import (
	"bufio"
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"flashsale/lock"
	"flashsale/lock/ladder"
)

// TestTaughtCommands watches, with Redis's MONITOR, the commands each
// single-node rung sends for one acquire and release with the speed layer
// off, and compares them with the commands its file says it sends. An
// attendee reading the rung beside redis-cli MONITOR must see exactly
// those: SETNX (not SET … NX) for the first broken rung, and PX (not EX)
// even when the TTL is a whole number of seconds.
func TestTaughtCommands(t *testing.T) {
	c := shared(t)
	cases := []struct {
		variant string
		want    []string // K is the lock key, V the holder's value
	}{
		{ladder.SetNXExpire, []string{"setnx K V", "pexpire K 2000", "del K"}},
		{ladder.GetDel, []string{"set K V nx px 2000", "get K", "del K"}},
		{ladder.PlainDel, []string{"set K V nx px 2000", "del K"}},
		{lock.Lua, []string{"set K V nx px 2000", "evalsha * 1 K V"}},
		{ladder.Attendee, []string{"set K V nx px 2000", "get K", "del K"}}, // as shipped
		// The article's Redlock, as node 0 sees it: its SET and its bare DEL.
		{ladder.ArticleRedlock, []string{"set K V nx px 2000", "del K"}},
	}
	for _, tc := range cases {
		t.Run(tc.variant, func(t *testing.T) {
			// 2s, a whole number of seconds: the TTL a client would round
			// to EX 2 if it chose the command by the value.
			e := newEnv(t, c, lock.Options{TTL: 2 * time.Second, FastOff: true})
			e.voting()
			lk, err := e.ls.Locker(tc.variant)
			if err != nil {
				t.Fatal(err)
			}
			key := e.ns + "lock:taught"
			mon := monitor(t, e.nodes[0].Addr)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			lease, err := lk.Acquire(ctx, "taught")
			if err != nil {
				t.Fatalf("acquire: %v", err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			got := mon.commandsOn(t, key, lease.Owner(), len(tc.want))
			for i, w := range tc.want {
				if !matches(got[i], w) {
					t.Errorf("command %d on the lock key = %q, the rung file says %q (all: %q)", i+1, got[i], w, got)
				}
			}
		})
	}
}

// monitorConn is a raw MONITOR connection to one node.
type monitorConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// monitor opens MONITOR on addr and returns once the node streams to it.
func monitor(t *testing.T, addr string) *monitorConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	m := &monitorConn{conn: conn, r: bufio.NewReader(conn)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := m.r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	return m
}

var quoted = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

// commandsOn reads the monitor until n commands naming key have passed,
// and returns them lower-cased, with the key as K and value as V.
func (m *monitorConn) commandsOn(t *testing.T, key, value string, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		line, err := m.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading MONITOR after %q: %v", got, err)
		}
		var words []string
		onKey := false
		for _, q := range quoted.FindAllStringSubmatch(line, -1) {
			w := q[1]
			switch w {
			case key:
				w, onKey = "K", true
			case value:
				w = "V"
			default:
				w = strings.ToLower(w)
			}
			words = append(words, w)
		}
		if onKey {
			got = append(got, strings.Join(words, " "))
		}
	}
	return got
}

// matches compares a seen command with a wanted one, where * stands for
// any one word (a script's hash).
func matches(got, want string) bool {
	g, w := strings.Fields(got), strings.Fields(want)
	if len(g) != len(w) {
		return false
	}
	for i := range w {
		if w[i] != "*" && w[i] != g[i] {
			return false
		}
	}
	return true
}
