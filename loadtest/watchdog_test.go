package loadtest

import (
	"slices"
	"testing"
	"time"
)

// The watchdog and lease-check columns, and lua+check's row, as
// docs/design.md gives them.
func TestWatchdogAndLeaseCheckCells(t *testing.T) {
	h, b, e, n := Holds, Breaks, Either, NoClaim
	cols := []string{LongWork, LongWorkWatchdog, PauseAfterLeaseCheck}
	for v, row := range map[string][]Outcome{
		"none":          {b, b, b},
		"setnx-expire":  {b, e, b},
		"get-del":       {b, e, b},
		"plain-del":     {b, e, b},
		"lua":           {b, h, b},
		"redlock":       {b, h, b},
		"lua+check":     {n, h, b},
		"lua+fence":     {h, h, h},
		"redlock+fence": {h, h, h},
	} {
		for i, want := range row {
			if got, ok := Expected(v, cols[i]); !ok || got != want {
				t.Errorf("%s × %s: %q (in matrix: %v), want %q", v, cols[i], got, ok, want)
			}
			if want == e && EitherWhy(v, cols[i]) == "" {
				t.Errorf("%s × %s is either way without a why", v, cols[i])
			}
		}
	}
	for sc, want := range map[string]Outcome{
		Clean: h, CrashBetweenSteps: h, PauseBetweenReleaseSteps: h, PauseInCriticalSection: h,
		NodeDown: h, NodeRestart: e, ClockJump: e, NetworkDelay: h,
	} {
		if got, _ := Expected("lua+check", sc); got != want {
			t.Errorf("lua+check × %s: %q, want %q", sc, got, want)
		}
	}
	const ttl = 500 * time.Millisecond
	for _, s := range Scenarios(ttl) {
		if s.Watchdog != (s.Name == LongWorkWatchdog) {
			t.Errorf("%s: watchdog %v", s.Name, s.Watchdog)
		}
		if (s.Name == LongWork || s.Name == LongWorkWatchdog) && s.WorkMS <= int(ttl.Milliseconds()) {
			t.Errorf("%s: work %d ms is not longer than the %v TTL", s.Name, s.WorkMS, ttl)
		}
	}
}

// -watchdog runs every cell with the watchdog on, and long-work's cells as
// long-work-watchdog's.
func TestWatchdogSwitchJudgesLongWorkAsItsTwin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		scenarios []string
		cells     []string
	}{
		{"off", Config{Scenarios: []string{LongWork, Clean}, Cells: []string{"lua/long-work"}},
			[]string{Clean, LongWork}, []string{"lua/long-work"}},
		{"on", Config{Watchdog: true, Scenarios: []string{LongWork, Clean}, Cells: []string{"lua/long-work"}},
			[]string{Clean, LongWorkWatchdog}, []string{"lua/long-work-watchdog"}},
		{"on, both columns", Config{Watchdog: true, Scenarios: []string{LongWork, LongWorkWatchdog}},
			[]string{LongWorkWatchdog}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if err := cfg.defaults(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Scenarios, tc.scenarios) || !slices.Equal(cfg.Cells, tc.cells) {
				t.Errorf("scenarios %v, cells %v; want %v, %v", cfg.Scenarios, cfg.Cells, tc.scenarios, tc.cells)
			}
		})
	}
}

// With batching on, what holds still holds, none still breaks, and the
// broken rungs' breaks go either way.
func TestExpectedBatched(t *testing.T) {
	for _, v := range Variants {
		for _, sc := range ScenarioNames() {
			plain, ok := Expected(v, sc)
			got, okB := ExpectedBatched(v, sc)
			if ok != okB {
				t.Fatalf("%s × %s: in the matrix %v, batched %v", v, sc, ok, okB)
			}
			want := plain
			if plain == Breaks && v != "none" && v != "attendee" {
				want = Either
			}
			if got != want {
				t.Errorf("%s × %s batched: %q, want %q (unbatched %q)", v, sc, got, want, plain)
			}
		}
	}
	for _, c := range [][2]string{{"none", Clean}, {"lua+fence", PauseInCriticalSection}, {"redlock+fence", PauseInCriticalSection}, {"redlock", Clean}} {
		want := Holds
		if c[0] == "none" {
			want = Breaks
		}
		if got, _ := ExpectedBatched(c[0], c[1]); got != want {
			t.Errorf("%s × %s batched: %q, want %q", c[0], c[1], got, want)
		}
	}
}

// With the watchdog on in every cell, a holder past its validity is refused
// at its check before the write: the correct rungs hold where only that
// broke them, a broken rung's flaws elsewhere may still show, no lock
// still breaks, and a pause after the check still breaks every unfenced rung.
func TestExpectedWatchdog(t *testing.T) {
	for _, tc := range []struct {
		variant, scenario string
		want              Outcome
	}{
		{"lua", PauseInCriticalSection, Holds},
		{"redlock", PauseInCriticalSection, Holds},
		{"lua", NetworkDelay, Holds},
		{"redlock", NetworkDelay, Holds},
		{"plain-del", PauseInCriticalSection, Either},
		{"setnx-expire", NetworkDelay, Either},
		{"none", PauseInCriticalSection, Breaks},
		{"attendee", PauseInCriticalSection, Breaks},
		{"lua", PauseAfterLeaseCheck, Breaks},
		{"lua", ClockJump, Breaks},
		{"lua", LongWork, Holds},
		{"lua+fence", PauseInCriticalSection, Holds},
	} {
		if got, ok := ExpectedWatchdog(tc.variant, tc.scenario); !ok || got != tc.want {
			t.Errorf("%s × %s with the watchdog: %q (in matrix: %v), want %q", tc.variant, tc.scenario, got, ok, tc.want)
		}
	}
	for _, v := range Variants {
		for _, sc := range ScenarioNames() {
			if sc == PauseInCriticalSection || sc == NetworkDelay {
				continue
			}
			plain, ok := Expected(v, WatchdogTwin(sc))
			if got, okW := ExpectedWatchdog(v, sc); got != plain || ok != okW {
				t.Errorf("%s × %s with the watchdog: %q, want its twin's %q", v, sc, got, plain)
			}
		}
	}
}

// attendee is judged by none's row, but for its own either cell: under
// long-work-watchdog its owner-checked extend finds every lease whose
// acquire only seemed to succeed, and the check before the write refuses it.
func TestAttendeeKeepsItsOwnEitherCell(t *testing.T) {
	for _, sc := range ScenarioNames() {
		got, ok := Expected("attendee", sc)
		want, _ := Expected("none", sc)
		if sc == LongWorkWatchdog {
			want = Either
		}
		if ok && got != want {
			t.Errorf("attendee × %s: %q, want %q", sc, got, want)
		}
		if why := EitherWhy("attendee", sc); (why != "") != (sc == LongWorkWatchdog) {
			t.Errorf("attendee × %s: either because %q", sc, why)
		}
	}
}
