package lock_test

import (
	"context"
	"errors"
	"flashsale/internal/taptest"
	"flashsale/internal/testsupport"
	"flashsale/lock/ladder"
	"sync"
	"testing"
	"time"

	"flashsale/internal/fault"
	"flashsale/internal/locktap"
	"flashsale/lock"
)

// Work longer than the TTL: without the watchdog a second client gets the
// lock while the first still works; switched on at run time, the watchdog
// carries the lease through the work.
func TestWatchdogSwitchCarriesLongWork(t *testing.T) {
	testsupport.Long(t, "node failovers, restarts and sit-outs that take seconds")
	c := shared(t)
	const ttl = 600 * time.Millisecond
	for _, tc := range []struct {
		name      string
		watchdog  bool
		successor bool // a second client gets in during the work
	}{
		{"off", false, true},
		{"on", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c, lock.Options{TTL: ttl})
			e.ls.SetWatchdog(tc.watchdog)
			if e.ls.Watchdog() != tc.watchdog {
				t.Fatalf("Watchdog() = %v after SetWatchdog(%v)", e.ls.Watchdog(), tc.watchdog)
			}
			l := e.locker(lock.Lua)
			holder := mustAcquire(t, l, "k", time.Second)
			defer holder.Release(context.Background())
			// The business work: 3 TTLs, the second client trying throughout.
			ctx, cancel := context.WithTimeout(context.Background(), 3*ttl)
			defer cancel()
			other, err := l.Acquire(ctx, "k")
			if err == nil {
				_ = other.Release(context.Background())
			} else if !isBusy(err) {
				t.Fatal(err)
			}
			if got := err == nil; got != tc.successor {
				t.Fatalf("watchdog %v: a second client got in during work of 3 TTLs = %v, want %v", tc.watchdog, got, tc.successor)
			}
		})
	}
}

// The broken variants renew with PEXPIRE and no owner check: a holder whose
// lease ran out and went to a successor extends the successor's key, and
// learns nothing. lua's compare-and-pexpire refuses.
func TestExtendAfterTheLeaseChangedHands(t *testing.T) {
	c := shared(t)
	// Long enough that the second holder's shortened lease (ttl/4) is
	// still there when it is looked at, on a busy machine.
	const ttl = time.Second
	for _, tc := range []struct {
		name          string
		extendsOthers bool
		refused       bool // the first holder's extend says the lease is not its own
	}{
		{ladder.SetNXExpire, true, false},
		{ladder.GetDel, true, false},
		{ladder.PlainDel, true, false},
		{lock.Lua, false, true},
		{ladder.LuaCheck, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c, lock.Options{TTL: ttl})
			l := e.locker(tc.name)
			first := mustAcquire(t, l, "k", time.Second)
			second := mustAcquire(t, l, "k", 5*ttl) // in once the first lease expires
			defer second.Release(context.Background())
			// Time passes for the second holder: most of its lease is used.
			if err := e.raw[0].PExpire(context.Background(), e.ns+"lock:k", ttl/4).Err(); err != nil {
				t.Fatal(err)
			}
			err := first.Extend(context.Background())
			if gotRefused := errors.Is(err, lock.ErrNotHeld); gotRefused != tc.refused {
				t.Fatalf("the first holder's extend after the lease changed hands: %v, want refused = %v", err, tc.refused)
			}
			owner, err := e.raw[0].Get(context.Background(), e.ns+"lock:k").Result()
			if err != nil || owner != second.Owner() {
				t.Fatalf("the key is %q (%v), want the second holder's", owner, err)
			}
			extended := e.pttl(0, "k") > ttl/2
			if extended != tc.extendsOthers {
				t.Fatalf("the second holder's key was extended by the first holder's renewal = %v, want %v (PTTL %v)",
					extended, tc.extendsOthers, e.pttl(0, "k"))
			}
		})
	}
}

// The lease check before the write: a holder paused before it (inside its
// work) finds its lease lost and writes nothing; a holder paused after it
// passed the check and goes on to write beside its successor. Only
// lua+check checks; lua goes on in both cases.
func TestLeaseCheckBeforeWrite(t *testing.T) {
	c := shared(t)
	const ttl = 300 * time.Millisecond
	for _, tc := range []struct {
		variant string
		point   fault.Point
		refused bool // CheckBeforeWrite refuses the paused holder
	}{
		{ladder.LuaCheck, fault.InCriticalSection, true},
		{ladder.LuaCheck, fault.AfterLeaseCheck, false},
		{lock.Lua, fault.InCriticalSection, false},
		{lock.Lua, fault.AfterLeaseCheck, false},
	} {
		t.Run(tc.variant+"/"+string(tc.point), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c, lock.Options{TTL: ttl})
			l := e.locker(tc.variant)
			first := mustAcquire(t, l, "k", time.Second)
			// The pause outlasts the lease by far (the second holder waits one
			// TTL, then takes the lock): a loaded machine's stall of a second
			// must not let the first holder through before the second is in.
			setFaults(t, e, fault.Fault{Point: tc.point, Action: fault.Pause, P: 1, MS: int(10 * ttl / time.Millisecond)})
			checked := make(chan error, 1)
			go func() {
				if err := first.Checkpoint(context.Background(), fault.InCriticalSection); err != nil {
					checked <- err
					return
				}
				checked <- first.CheckBeforeWrite(context.Background())
			}()
			second := mustAcquire(t, l, "k", 8*ttl) // in while the first is paused
			defer second.Release(context.Background())
			select {
			case err := <-checked:
				t.Fatalf("the first holder was through before the second got in (%v): the pause did not outlast the lease", err)
			default: // still paused: the second holder holds the lock now
			}
			err := <-checked
			setFaults(t, e)
			if got := errors.Is(err, lock.ErrLockLost); got != tc.refused {
				t.Fatalf("check before the write after the lease went to a second holder: %v, want refused = %v", err, tc.refused)
			}
			if !tc.refused && err != nil {
				t.Fatalf("check before the write: %v, want nil", err)
			}
		})
	}
}

// A holder paused inside its critical section, then crashed: its watchdog,
// whose tick waited out the pause, must not send an extend once the crash
// is decided. One extend after it would keep a dead holder's lease alive
// for a further TTL.
func TestNoExtendAfterTheCrash(t *testing.T) {
	for _, name := range []string{lock.Lua, lock.Redlock} {
		t.Run(name, func(t *testing.T) {
			const ttl = 600 * time.Millisecond
			var mu sync.Mutex
			var crashedAt time.Time
			var extends []time.Time
			e := newEnv(t, shared(t), taptest.Observed(lock.Options{TTL: ttl, Watchdog: true}, func(ev locktap.Event) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case ev.Kind == locktap.Extended:
					extends = append(extends, ev.Time)
				case ev.Kind == locktap.FaultFired && ev.Fault.Action == fault.Crash:
					crashedAt = ev.Time
				}
			}))
			e.voting()
			// The pause outlasts a watchdog tick (TTL/3), which then waits
			// for the holder to wake; the crash comes right after it.
			setFaults(t, e,
				fault.Fault{Point: fault.InCriticalSection, Action: fault.Pause, P: 1, MS: 250},
				fault.Fault{Point: fault.AfterLeaseCheck, Action: fault.Crash, P: 1})
			ctx := context.Background()
			dead := mustAcquire(t, e.locker(name), "k", time.Second)
			if err := dead.Checkpoint(ctx, fault.InCriticalSection); err != nil {
				t.Fatal(err)
			}
			if err := dead.CheckBeforeWrite(ctx); !errors.Is(err, fault.ErrCrashed) {
				t.Fatalf("check before write: %v, want ErrCrashed", err)
			}
			e.waitGone(0, "k", 3*ttl)
			mu.Lock()
			defer mu.Unlock()
			for _, at := range extends {
				if at.After(crashedAt) {
					t.Fatalf("an extend was sent %v after the holder crashed", at.Sub(crashedAt))
				}
			}
		})
	}
}
