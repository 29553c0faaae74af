package handlers

import (
	"testing"
	"time"
)

// TestInFlightAdapts: slow answers shrink the bound (never below the
// least), answers in time while it is in use grow it back (never past the
// most), and a full bound admits nobody more.
func TestInFlightAdapts(t *testing.T) {
	const target = 100 * time.Millisecond
	l := newInFlight(20, target, nil)
	admitAll := func() (dones []func(time.Duration, bool, bool)) {
		for {
			done, _, _ := l.admit()
			if done == nil {
				return dones
			}
			dones = append(dones, done)
		}
	}
	steps := []struct {
		name      string
		took      time.Duration
		late      bool
		batched   bool
		wantLimit int
	}{
		{"slow answers shrink it, to a quarter", 2 * target, false, false, 5},
		{"in time, it grows back", target / 2, false, false, 20},
		{"lock_busy shrinks it as slowness does", target / 2, true, false, 5},
		{"and it recovers", time.Millisecond, false, false, 20},
		{"batched orders, slow or lock_busy, never shrink it", 2 * target, true, true, 20},
	}
	for _, st := range steps {
		for range 50 {
			dones := admitAll()
			if len(dones) != int(l.limit) {
				t.Fatalf("%s: admitted %d with the bound at %v", st.name, len(dones), l.limit)
			}
			for _, d := range dones {
				d(st.took, st.late, st.batched)
			}
		}
		if int(l.limit) != st.wantLimit {
			t.Errorf("%s: bound %v, want %d", st.name, l.limit, st.wantLimit)
		}
	}
}

// TestInFlightCutsOncePerRound: a crowd of slow answers to sales admitted
// together (one batch, one stall) cuts the bound once, not once each; the
// next round's slow answers cut it again.
func TestInFlightCutsOncePerRound(t *testing.T) {
	const target = 100 * time.Millisecond
	l := newInFlight(100, target, nil)
	var crowd []func(time.Duration, bool, bool)
	for range 60 {
		done, _, _ := l.admit()
		crowd = append(crowd, done)
	}
	for _, done := range crowd {
		done(2*target, false, false)
	}
	if int(l.limit) != 90 {
		t.Fatalf("after one slow crowd the bound is %v, want 90 (one cut)", l.limit)
	}
	done, _, _ := l.admit()
	done(2*target, true, false)
	if int(l.limit) != 81 {
		t.Fatalf("a slow sale of the next round left the bound at %v, want 81", l.limit)
	}
}
