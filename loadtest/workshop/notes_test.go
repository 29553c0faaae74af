package workshop

import (
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"time"
)

// A log line reaches the page as a note with its event and fields, so that
// the page can say it in Chinese from the fields, not by rewording the
// English; the English line stays beside them.
func TestNotesCarryTheirFields(t *testing.T) {
	for _, c := range []struct {
		name    string
		log     func(*slog.Logger)
		message string
		event   string
		fields  map[string]any
	}{
		{"cell done",
			func(l *slog.Logger) {
				l.Info("cell done", "variant", "plain-del", "scenario", "pause-in-critical-section", "seen", "breaks", "lost_updates", 47, "oversold_units", 0)
			},
			"cell done variant=plain-del scenario=pause-in-critical-section seen=breaks lost_updates=47 oversold_units=0",
			"cell done",
			map[string]any{"variant": "plain-del", "scenario": "pause-in-critical-section", "seen": "breaks", "lost_updates": 47.0, "oversold_units": 0.0}},
		{"fields given before the line",
			func(l *slog.Logger) { l.With("node", 3).Warn("localredis: node ignored SIGTERM, killing", "pid", 4242) },
			"localredis: node ignored SIGTERM, killing node=3 pid=4242",
			"localredis: node ignored SIGTERM, killing",
			map[string]any{"node": 3.0, "pid": 4242.0}},
		{"a duration and an error",
			func(l *slog.Logger) {
				l.Info("clients and nemesis done; healing", "elapsed", 1500*time.Millisecond, "err", errors.New("node 2 did not answer"))
			},
			"clients and nemesis done; healing elapsed=1.5s err=node 2 did not answer",
			"clients and nemesis done; healing",
			map[string]any{"elapsed": "1.5s", "err": "node 2 did not answer"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &workshopRun{changed: make(chan struct{})}
			c.log(slog.New(&noteHandler{run: r}))
			if len(r.events) != 1 {
				t.Fatalf("%d events, want one note", len(r.events))
			}
			b, err := json.Marshal(r.events[0]) // as the stream sends it
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Type, Message, Event string
				Fields               map[string]any
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.Type != "note" || got.Message != c.message || got.Event != c.event || !reflect.DeepEqual(got.Fields, c.fields) {
				t.Errorf("the note is %s;\nwant type note, message %q, event %q, fields %v", b, c.message, c.event, c.fields)
			}
		})
	}
}

// The note that says why node scenarios are skipped names its event, and
// the lease TTLs when this instance's is longer than the sequence's.
func TestNoNodesNote(t *testing.T) {
	for _, c := range []struct {
		ttl    time.Duration
		fields map[string]any
	}{
		{sequenceTTL, map[string]any{}},
		{2 * sequenceTTL, map[string]any{"lease_ttl": (2 * sequenceTTL).String(), "sized_for": sequenceTTL.String()}},
	} {
		ev := (&Runner{ttl: c.ttl}).noNodesNote()
		if ev["event"] != "node scenarios skipped" || ev["message"] != noNodes+(&Runner{ttl: c.ttl}).longerTTL() || !reflect.DeepEqual(ev["fields"], c.fields) {
			t.Errorf("TTL %v: the note is %v", c.ttl, ev)
		}
	}
}
