package history

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecorderRoundTrip writes through two recorders sharing one file, as
// two app processes do, and reads it back: every line is whole, stamped
// with its process, and a change made under no lease is not history.
func TestRecorderRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b.proc = "pid:other"
	stock := int64(9)
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	a.Write(Record{Time: at, Kind: "lease", Op: "acquired", Variant: "lua+fence", Key: "sku:hot", Owner: "o1", Token: 7, Fenced: true})
	b.Change(Change{Type: "stock", SKU: "hot", Stock: &stock, Owner: "o1"})
	b.Change(Change{Type: "reset"}) // no lease: not history
	var none *Recorder
	none.Write(Record{Kind: "lease"}) // a nil recorder records nothing
	if err := errors.Join(a.Close(), b.Close(), none.Close()); err != nil {
		t.Fatal(err)
	}

	got, err := ReadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("want 2 records (acquired, write), got %d: %+v", len(got), got)
	}
	acq, w := got[0], got[1]
	if !acq.Time.Equal(at) || acq.Proc == "" || acq.Proc == "pid:other" || acq.Token != 7 || !acq.Fenced || acq.Owner != "o1" {
		t.Errorf("lease record %+v", acq)
	}
	if w.Kind != "write" || w.Op != "stock" || w.Proc != "pid:other" || w.Owner != "o1" || w.Stock == nil || *w.Stock != 9 || w.Time.IsZero() {
		t.Errorf("write record %+v", w)
	}
}

// TestReadsEveryKind reads the lines the client and the nemesis write,
// which this package does not write itself, into the same Record.
func TestReadsEveryKind(t *testing.T) {
	in := `{"t":"2026-01-02T10:00:00Z","kind":"ack","op":"order","variant":"lua","status":201,"idempotency_key":"chaos-1"}` + "\n" +
		`{"t":"2026-01-02T10:00:01Z","kind":"nemesis","op":"start","fault":"app-pause","target":"app 1","detail":"2s"}` + "\n"
	got, err := Read(strings.NewReader(in))
	if err != nil || len(got) != 2 {
		t.Fatalf("got %d records, %v", len(got), err)
	}
	if a := got[0]; a.Kind != "ack" || a.Variant != "lua" || a.Status != 201 || a.IdempotencyKey != "chaos-1" {
		t.Errorf("ack %+v", a)
	}
	if n := got[1]; n.Kind != "nemesis" || n.Op != "start" || n.Fault != "app-pause" || n.Target != "app 1" || n.Detail != "2s" {
		t.Errorf("nemesis %+v", n)
	}
}

func TestReadSkipsATornLastLine(t *testing.T) {
	in := `{"t":"2026-01-02T10:00:00Z","kind":"ack","op":"order","status":201}` + "\n" + `{"t":"2026-01-02T10:00:01Z","kind":"ack","op":"or`
	recs, err := Read(strings.NewReader(in))
	if err != nil || len(recs) != 1 {
		t.Fatalf("got %d records, %v; want the whole first line only", len(recs), err)
	}
	if _, err := Read(strings.NewReader("{bad\n" + `{"kind":"ack"}` + "\n")); err == nil {
		t.Fatal("a bad line before the last one must be an error")
	}
}
