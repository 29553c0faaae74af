package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"flashsale/internal/history"
	"flashsale/internal/localredis"
	"flashsale/internal/locktap"
	"flashsale/internal/testsupport"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// TestHistoryRecordsLeasesAndWrites takes a real fenced lease on a real
// node, with the recorder as the lock's observer (wired as run wires it),
// and reads the file back: the acquire and the release carry the holder's
// view of the lease, and the write carries the owner that ties it to that
// lease.
func TestHistoryRecordsLeasesAndWrites(t *testing.T) {
	c := testsupport.Redis(t, 1, localredis.Options{})
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	lockers, err := lock.New(testsupport.Options(t, c), ladder.With(locktap.Tapped(lock.Options{TTL: time.Second}, locktap.Tap{Observer: func(e locktap.Event) { recordLease(rec, e) }})))
	if err != nil {
		t.Fatal(err)
	}
	defer lockers.Close()
	l, err := lockers.Locker(lock.LuaFence)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := l.Acquire(ctx, "sku:hot")
	if err != nil {
		t.Fatal(err)
	}
	stock := int64(9)
	rec.Change(history.Change{Type: "stock", SKU: "hot", Stock: &stock, Owner: lease.Owner()})
	rec.Change(history.Change{Type: "reset"}) // no lease: not history
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := history.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("want 3 records (acquired, write, released), got %d: %+v", len(got), got)
	}
	acq, w, rel := got[0], got[1], got[2]
	token, _ := lease.Token()
	if acq.Kind != "lease" || acq.Op != "acquired" || acq.Key != "sku:hot" || acq.Variant != lock.LuaFence ||
		acq.Owner != lease.Owner() || acq.Token != token || token == 0 || !acq.Fenced {
		t.Errorf("acquired record %+v does not describe the lease (token %d)", acq, token)
	}
	if acq.Acquired == nil || acq.ValidUntil == nil || !acq.ValidUntil.After(*acq.Acquired) {
		t.Errorf("acquired record has no validity window: %+v", acq)
	}
	if w.Kind != "write" || w.Op != "stock" || w.Owner != lease.Owner() || w.Stock == nil || *w.Stock != 9 {
		t.Errorf("write record %+v", w)
	}
	if rel.Op != "released" || rel.Owner != lease.Owner() || rel.Err != "" || rel.Time.Before(acq.Time) {
		t.Errorf("released record %+v", rel)
	}
	if acq.Proc == "" || acq.Proc != rel.Proc {
		t.Errorf("records name no process: %q, %q", acq.Proc, rel.Proc)
	}
}
