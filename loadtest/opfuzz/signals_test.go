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
