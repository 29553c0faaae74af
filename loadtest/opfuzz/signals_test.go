package opfuzz

import (
	"bytes"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// A line of the lock's log, as slog writes it, is one signal: the message's
// first words, the last operator action on the node it names before it was
// logged, and the holder's TTL; a grant is one too, with what its process
// met the nodes after.
func TestSignals(t *testing.T) {
	addrs := []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}
	t0 := time.Now()
	acted := []actedAt{
		{t0, Action{Op: "holder", Node: -1, Arg: "redlock", D: time.Second}},
		{t0.Add(time.Second), Action{Op: "acl", Node: 2, Arg: "-eval"}},
		{t0.Add(2 * time.Second), Action{Op: "flushall", Node: 1}},
		{t0.Add(5 * time.Second), Action{Op: "flushall", Node: 2}},
	}
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil)).With("pid", 42, "ttl", time.Second)
	at := func(d time.Duration) slog.Attr { return slog.Time(slog.TimeKey, t0.Add(d)) }
	// The handler writes the record's time: rewrite it through ReplaceAttr.
	for _, l := range []struct {
		d     time.Duration
		msg   string
		level slog.Level
		node  string
	}{
		{3 * time.Second, "redis node refuses for good to tell what restart awareness reads: a restart", slog.LevelWarn, addrs[2]},
		{3 * time.Second, "redis node restarted, failed over or flushed: not counted", slog.LevelWarn, addrs[0]},
		{6 * time.Second, "redis node restarted, failed over or flushed: not counted", slog.LevelWarn, addrs[2]},
	} {
		h := slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return at(l.d)
			}
			return a
		}})
		slog.New(h).With("pid", 42, "ttl", time.Second).Log(t.Context(), l.level, l.msg, "node", l.node)
	}
	logger.Info("") // no message: no signal
	grants := []Grant{{PID: 42, TTL: "1s", Acquired: t0.Add(2500 * time.Millisecond).UnixNano()}}
	got := signals([][]byte{log.Bytes()}, grants, nil, acted, map[int]time.Time{42: t0.Add(1500 * time.Millisecond)}, addrs)
	want := []string{
		`WARN "redis node refuses for good to" after acl -eval ttl=1s`,
		`WARN "redis node restarted failed over or" after flushall ttl=1s`,
		`WARN "redis node restarted failed over or" after nothing ttl=1s`,
		`grant ttl=1s to a process started after acl -eval, after flushall`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("signals:\n%q\nwant\n%q", got, want)
	}
}

// The corpus keeps a sequence for a new signal and for a shorter way to a
// known one, and mutates only sequences that are still the shortest way to
// some signal: once a short sequence reaches everything a long one did,
// the long one is never picked again.
func TestCorpusFavoursTheShortestWay(t *testing.T) {
	mustParse := func(s string) Sequence {
		seq, err := Parse(s, 5)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	long := mustParse("holder redlock 1s; wait 7s; save 1; wait 2s; flushall 1; holder redlock 6s")
	short := mustParse("holder redlock 1s; flushall 1; holder redlock 6s")
	c := newCorpus()
	if fresh := c.add(1, long, Outcome{Took: 12 * time.Second, Signals: []string{"a", "b"}}); len(fresh) != 2 {
		t.Fatalf("new signals %q, want a and b", fresh)
	}
	if fresh := c.add(2, long, Outcome{Took: 12 * time.Second, Signals: []string{"a"}}); len(fresh) != 0 || len(c.entries) != 1 {
		t.Fatalf("the same way to a known signal: new %q, %d kept; want none new, one kept", fresh, len(c.entries))
	}
	c.add(3, short, Outcome{Took: 3 * time.Second, Signals: []string{"a", "b"}})
	if len(c.entries) != 2 || c.best["a"] != 1 || c.best["b"] != 1 {
		t.Fatalf("after a shorter way: %d kept, best %v; want 2 kept, both signals' best the short one", len(c.entries), c.best)
	}
	steer := SearchOptions{Steer: true, Nodes: 5, Space: DefaultSpace}
	for seed := int64(10); seed < 200; seed++ {
		if _, from := c.draw(seed, steer); from == 1 {
			t.Fatalf("seed %d mutated the long sequence, which is no signal's shortest way", seed)
		}
	}
	if c.entries[1].picked == 0 {
		t.Fatal("the short sequence was never picked")
	}
}
