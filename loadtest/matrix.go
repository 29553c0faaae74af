package loadtest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"flashsale/lock"
)

// Variants are the lock variants in ladder order, as the lock package
// declares them. They are the values of the X-Lock-Variant header; the runner
// knows them only as names.
var Variants = lock.Names()

// Outcome is what a cell of the matrix does: the sale holds, or it breaks.
type Outcome string

// Outcomes, as docs/design.md defines them.
const (
	// Holds: no overselling, no lost update, no double booking, no stuck
	// lock, no order lost or invented (503s are allowed).
	Holds Outcome = "holds"
	// Breaks: at least one of those, coming out of the real race.
	Breaks Outcome = "breaks"
	// NoClaim: docs/design.md promises nothing for the cell; it is run and shown,
	// not judged.
	NoClaim Outcome = "no claim"
	// Either: the cell can hold or break depending on timing the runner
	// does not control (eitherWay says why for each); it is run and shown,
	// and either outcome is as expected, so the exit status stays a
	// guarantee.
	Either Outcome = "either"
)

// Scenario names: the columns of the matrix.
const (
	Clean                    = "clean"
	CrashBetweenSteps        = "crash-between-steps"
	PauseBetweenReleaseSteps = "pause-between-release-steps"
	PauseInCriticalSection   = "pause-in-critical-section"
	NodeDown                 = "node-down"
	NodeRestart              = "node-restart"
	// NodeRestartUnaware is node-restart with the app's Redlock restart
	// awareness turned off. docs/design.md gives it as the second half of the
	// redlock cell ("breaks without restart awareness, holds with it"); here
	// it is its own column so both halves are measured, on the Redlock
	// variants only (no other variant has restart awareness to turn off).
	NodeRestartUnaware = "node-restart-unaware"
	// ClockJump makes the clocks of a majority of the nodes (node 0
	// among them) leap forward again and again while holders work.
	ClockJump = "clock-jump"
	// NetworkDelay delays every reply from the nodes to one app instance
	// past the lease TTL: a grant that arrives after its lease ran out.
	NetworkDelay = "network-delay"
	// Partition cuts instance 0 off the last two nodes and instance 1 off
	// the first two (Redlock variants only).
	Partition = "partition"
	// Failover puts the single-node variants' node behind Redis Sentinel
	// (a master, its replica, three sentinels) and kills the master after
	// a grant it has not replicated: the promoted replica grants the same
	// lock again (single-node variants only; Redlock's independent masters
	// have no failover).
	Failover = "failover"
	// LongWork is a business step longer than the lease TTL, watchdog off.
	LongWork = "long-work"
	// LongWorkWatchdog is long-work with the lease watchdog on.
	LongWorkWatchdog = "long-work-watchdog"
	// PauseAfterLeaseCheck pauses holders after their last look at the
	// lease (lua+check's check) and before their write.
	PauseAfterLeaseCheck = "pause-after-lease-check"
)

// Fault is one entry of the app's fault plan (PUT /api/admin/faults).
type Fault struct {
	Point  string  `json:"point"`
	Action string  `json:"action"`
	P      float64 `json:"p"`
	MS     int     `json:"ms,omitempty"`
}

// Scenario is one column of the matrix: the app's faults and business work,
// and what happens to the Redis nodes during the attack.
type Scenario struct {
	Name string `json:"name"`
	// Doc says what the scenario does to the sale, for the report.
	Doc string `json:"doc"`
	// WorkMS is the business work inside every critical section: the window
	// a broken lock lets two holders into. Never zero, so that `none` has
	// a real race to lose in every column.
	WorkMS int     `json:"work_ms"`
	Faults []Fault `json:"faults,omitempty"`
	// Nodes is what happens to the Redis nodes during the attack; nil for
	// nothing. It needs nodes the runner started itself.
	Nodes *NodeRecipe `json:"nodes,omitempty"`
	// Unaware runs the cells on app instances with Redlock restart
	// awareness off.
	Unaware bool `json:"restart_aware_off,omitempty"`
	// LockTTL, when set, runs the cells on app instances with this lease
	// TTL instead of the run's.
	LockTTL time.Duration `json:"lock_ttl_ns,omitempty"`
	// MinDuration, when longer than the run's duration, is how long the
	// scenario's attacks last: a scenario whose fault comes in rounds needs
	// several of them.
	MinDuration time.Duration `json:"min_duration_ns,omitempty"`
	// Only restricts the scenario to these variants; nil means all.
	Only []string `json:"only,omitempty"`
	// Failover runs the cells on app instances whose first node is the
	// master of a Sentinel cluster the runner starts (-redis-sentinel).
	Failover bool `json:"failover,omitempty"`
	// Watchdog runs the cells with the lease watchdog on, switched at run
	// time with the fault plan (so it needs no instance restart).
	Watchdog bool `json:"watchdog,omitempty"`
}

// Applies reports whether the scenario has a cell for variant.
func (s Scenario) Applies(variant string) bool {
	return s.Only == nil || slices.Contains(s.Only, variant)
}

// Scenarios are the columns of the matrix for a lease TTL of ttl (the app's
// -lock-ttl): every pause that must outlast a lease is a multiple of ttl,
// so it does whatever the TTL, and the node-restart recipe holds the lease long
// enough (a slow critical section) for a restart to land inside it.
func Scenarios(ttl time.Duration) []Scenario {
	pause := int((ttl * 8 / 5).Milliseconds())
	// The late DEL of a release paused past the TTL does harm only if it
	// lands on a holder still at work; every holder in between that paused
	// too is a DEL wasted on a lock nobody is using. So the pause outlasts
	// the TTL by a little (1.2 ×), and the critical section is long.
	releasePause := int((ttl * 6 / 5).Milliseconds())
	restart := func(unaware bool) Scenario {
		// A restarted node must be back, and a second client in, while the
		// first is still inside its critical section. On a loaded machine a
		// redis-server restart takes up to half a second, and a fresh
		// connection needs several round trips inside the lock's per-node
		// timeout (TTL/20), so these columns run with four times the lease
		// TTL: a critical section of 0.4 TTL, and a per-node timeout four
		// times as patient.
		ttl := 4 * ttl
		s := Scenario{
			Name: NodeRestart,
			Doc: fmt.Sprintf("lease TTL %v and every critical section slow (%d ms); in rounds, the last nodes are killed so leases hold "+
				"a bare quorum; as such a lease begins, node 0 (one of that quorum, and the single-node variants' only node) is restarted "+
				"without its data and the killed nodes come back empty", ttl, slowWork(ttl)),
			WorkMS:  slowWork(ttl),
			Nodes:   restartRecipe(ttl),
			LockTTL: ttl,
			// Each restart round is one chance for the second client to get
			// in while the first still works; on a loaded machine a round
			// can miss, so a cell runs long enough for a few rounds.
			MinDuration: 5 * ttl / 2,
		}
		if unaware {
			s.Name = NodeRestartUnaware
			s.Doc = "as node-restart, on app instances started with Redlock restart awareness off"
			s.Unaware = true
			s.Only = []string{"redlock", "redlock+fence"}
		}
		return s
	}
	return []Scenario{
		{
			Name:   Clean,
			Doc:    "concurrency only: a 5 ms critical section and no fault",
			WorkMS: 5,
		},
		{
			Name:   CrashBetweenSteps,
			Doc:    "5% of acquires are abandoned right after acquire step 1, as by a process dying there",
			WorkMS: 5,
			Faults: []Fault{{Point: "after-acquire-step1", Action: "crash", P: 0.05}},
		},
		{
			Name: PauseBetweenReleaseSteps,
			Doc: fmt.Sprintf("15%% of releases pause %d ms (longer than the %v TTL) between their check and their delete; "+
				"a 50 ms critical section, so the late delete mostly lands on a holder still at work", releasePause, ttl),
			WorkMS: 50,
			Faults: []Fault{{Point: "between-release-steps", Action: "pause", P: 0.15, MS: releasePause}},
			// About one fired pause in five lands on a holder at work: a
			// cell needs a few dozen to show it for certain.
			MinDuration: 3 * time.Second,
		},
		{
			Name:   PauseInCriticalSection,
			Doc:    fmt.Sprintf("10%% of holders pause %d ms (longer than the %v TTL) between reading and writing stock", pause, ttl),
			WorkMS: 5,
			Faults: []Fault{{Point: "in-critical-section", Action: "pause", P: 0.1, MS: pause}},
		},
		{
			Name:   NodeDown,
			Doc:    "a third into the run, 2 of the 5 Redis nodes are stopped (never node 0, which single-node variants use)",
			WorkMS: 5,
			Nodes:  downRecipe(),
		},
		restart(false),
		restart(true),
		{
			Name: ClockJump,
			Doc: fmt.Sprintf("from 10%% to 90%% of the run, every %v the clocks of nodes 0–2 jump %v ahead (simulated on the node: every lock key's TTL "+
				"shortened by the jump, so a lease being used expires under its holder); a 50 ms critical section", ttl/2, 2*ttl),
			WorkMS:      50,
			Nodes:       clockJumpRecipe(ttl),
			MinDuration: 3 * time.Second,
		},
		{
			Name: NetworkDelay,
			Doc: fmt.Sprintf("from the start to 90%% of the run, every reply from the nodes to app instance 0 arrives %v late (longer than the %v TTL); "+
				"the other instances are not slowed", 6*ttl/5, ttl),
			WorkMS: 20,
			Nodes:  delayRecipe(6 * ttl / 5),
			// The delay must stay under the lock wait (1s), or the late grant
			// is never used: the cell runs with the run's TTL, which the
			// command keeps at 500 ms by default.
			MinDuration: 3 * time.Second,
		},
		longWork(ttl, false),
		longWork(ttl, true),
		{
			Name: PauseAfterLeaseCheck,
			Doc: fmt.Sprintf("10%% of holders pause %d ms (longer than the %v TTL) after their last look at the lease, just before writing stock "+
				"(for a variant that does not check, the same place)", pause, ttl),
			WorkMS: 5,
			Faults: []Fault{{Point: "after-lease-check", Action: "pause", P: 0.1, MS: pause}},
		},
		{
			Name:        Partition,
			Doc:         "from 10% to 90% of the run, app instance 0 reaches only nodes 0–2 and instance 1 only nodes 2–4 (both ways cut); instance 2 reaches all",
			WorkMS:      20,
			Nodes:       partitionRecipe(),
			MinDuration: 3 * time.Second,
			Only:        []string{"redlock", "redlock+fence"},
		},
		failoverScenario(),
	}
}

// failoverScenario is the failover column. Its times are the failover's,
// not the lease TTL's: the sentinels call a master down after three seconds
// of silence and need one or two more to agree and promote, so the first
// holder's critical section must outlast that for the second holder to
// meet it, and the lease must outlast the critical section (a lease that
// expires under its holder would break lua by itself, failover or not).
func failoverScenario() Scenario {
	return Scenario{
		Name: Failover,
		Doc: fmt.Sprintf("the single-node variants' node is a Sentinel-managed master with one replica; lease TTL %v and every critical section %d ms; "+
			"replication is held back, the master killed as soon as a lease is granted, the replica promoted without it", failoverTTL, failoverWork),
		WorkMS:      failoverWork,
		Nodes:       failoverRecipe(),
		LockTTL:     failoverTTL,
		MinDuration: 8 * time.Second,
		Failover:    true,
		Only:        []string{"none", "setnx-expire", "get-del", "plain-del", "lua", "lua+check", "lua+fence", "db-guard", "redis-stock"},
	}
}

// failoverWork and failoverTTL: see failoverScenario.
const (
	failoverWork = 10000
	failoverTTL  = 30 * time.Second
)

// longWork is the watchdog's column: every critical section is two TTLs
// long, so every lease runs out under its holder unless a watchdog extends
// it; the second form has the watchdog on. Two TTLs, not a little over one,
// so that the successor is in and has read before the first holder writes.
func longWork(ttl time.Duration, watchdog bool) Scenario {
	s := Scenario{
		Name: LongWork,
		Doc: fmt.Sprintf("every critical section works %v, twice the %v TTL, with no lease watchdog; no fault",
			2*ttl, ttl),
		WorkMS: int((2 * ttl).Milliseconds()),
		// A critical section is a second long: a cell needs a few per key.
		MinDuration: 3 * time.Second,
	}
	if watchdog {
		s.Name, s.Watchdog = LongWorkWatchdog, true
		s.Doc = fmt.Sprintf("as long-work, with the lease watchdog on (every lease extended every %v until released)", ttl/3)
	}
	return s
}

// WatchdogTwin is the column a scenario is judged as when a run turns the
// watchdog on for every cell (Config.Watchdog): long-work becomes
// long-work-watchdog; every other column keeps its expectation, since a
// pause freezes the watchdog, a crash stops it and a release stops it before
// its first step.
func WatchdogTwin(scenario string) string {
	if scenario == LongWork {
		return LongWorkWatchdog
	}
	return scenario
}

// slowWork is the critical section of the node-restart scenarios: long
// enough that a lease is still inside it when a restarted node answers
// again, short enough (under half the TTL) that no lease outlives its TTL.
func slowWork(ttl time.Duration) int {
	return int((ttl * 2 / 5).Milliseconds())
}

// ScenarioNames lists the scenario names in column order.
func ScenarioNames() []string {
	var out []string
	for _, s := range Scenarios(time.Second) {
		out = append(out, s.Name)
	}
	return out
}

// expected is docs/design.md's matrix, column by column: the variants that break
// in it; every other variant the scenario applies to holds. The rungs
// without a lock (db-guard, db-for-update, redis-stock) break in no column:
// the store is their guard, so no fault on a lock or a Redis node can let
// two buyers take one unit. redis-stock under node-restart holds by
// refusing: node 0 comes back without the stock, and its sales answer 503
// until a reset seeds it again (inventory/redis_stock.go).
var expected = map[string][]string{
	Clean:                    {"none"},
	CrashBetweenSteps:        {"none", "setnx-expire"},
	PauseBetweenReleaseSteps: {"none", "get-del"},
	PauseInCriticalSection:   {"none", "setnx-expire", "get-del", "plain-del", "lua", "redlock"},
	NodeDown:                 {"none"},
	// ² lua+fence: the restarted node lost its fence counter, so the store
	// refuses the lower tokens: unavailable, never unsafe.
	NodeRestart: {"none", "setnx-expire", "get-del", "plain-del", "lua"},
	// docs/design.md: redlock "breaks without restart awareness".
	NodeRestartUnaware: {"redlock"},
	// A majority's clocks jump: every lease without fencing is cut short
	// under its holder; Redlock's quorum is no defence.
	ClockJump: {"none", "setnx-expire", "get-del", "plain-del", "lua", "redlock"},
	// A grant that arrives after its TTL: a single node's SET NX PX lease
	// is already gone; setnx-expire's EXPIRE, delayed past the wait,
	// never comes (a key with no TTL). Redlock measures its validity and
	// refuses the late grant.
	NetworkDelay: {"none", "setnx-expire", "get-del", "plain-del", "lua"},
	// Each side of the partition still reaches a majority of its own, and
	// two majorities of five always share a node.
	Partition: {},
	// The promoted replica never saw the first lease. lua+fence: nor the
	// first token, so its next tokens do not pass the lost one and the
	// store refuses them (and were its counter re-seeded above it, the
	// store would refuse the lost holder instead): one writer either way.
	Failover: {"none", "setnx-expire", "get-del", "plain-del", "lua"},
	// Every lease runs out mid-work and a successor reads the same stock.
	// lua+check's holder finds its validity gone before the write and
	// writes nothing (409 lease_lost: safe, but nothing sells); a fenced
	// holder's write carries an older token than the row's and is refused.
	LongWork: {"none", "setnx-expire", "get-del", "plain-del", "lua", "redlock"},
	// The watchdog keeps every lease while its holder works. The broken
	// variants renew with PEXPIRE and no owner check, but that renews a
	// successor's key only once a lease is lost, which nothing here causes
	// (lock/watchdog_check_test.go shows it happen).
	LongWorkWatchdog: {"none"},
	// The pause lands after lua+check's look at its lease: it passed, and
	// the stale write follows. Only the store's token check stops it.
	PauseAfterLeaseCheck: {"none", "setnx-expire", "get-del", "plain-del", "lua", "redlock", "lua+check"},
}

// eitherWay are the cells whose outcome depends on timing, with why. The
// runner accepts either outcome for them.
var eitherWay = map[string]map[string]string{
	PauseBetweenReleaseSteps: {
		// Seen in a full run (seed 42): releases paused past the TTL make
		// waiters wait their whole budget; a wait deadline that lands
		// between SETNX and EXPIRE leaves a key with no TTL. The variant's
		// real flaw, but whether a deadline lands there is timing.
		"setnx-expire": "a wait deadline can land between SETNX and EXPIRE and leave a key with no TTL (the variant's real flaw), or not",
	},
	LongWorkWatchdog: {
		// Seen in quick runs: plain-del and get-del lost an update here. A
		// watchdog extend that comes late (a busy machine; their waiters
		// do not queue, they all keep trying) lets a successor in; the broken variants' PEXPIRE then
		// renews the successor's key and never reports the lease lost, and a
		// bare DEL frees the successor's lock for a third client.
		"setnx-expire": "waiters reach their wait deadline all the time here, and one landing between SETNX and EXPIRE leaves a key with no TTL; " +
			"and a late extend is renewed on the successor's key (PEXPIRE without owner check), whose lock the bare DEL then frees",
		"get-del":   lateExtend,
		"plain-del": lateExtend + ", whose lock the bare DEL then frees",
	},
	NodeRestart: {
		"lua+check": "the check before the write finds a lease the restart erased, unless the restart lands between a holder's check and its write",
	},
	Failover: {
		// The first holder's check asks the new master, which by then
		// holds the second holder's value.
		"lua+check": "the check before the write asks the promoted master and finds the second holder's value, unless the failover lands between a holder's check and its write",
		// Seen in a run: 39 of 40 sold, none oversold. The column's 8 s
		// sales are slow; the stale stock shows only if the SKU sells out.
		"redis-stock": "the promoted replica has the stock as it was when replication stopped, so the units sold since are sold again " +
			"(oversold) if the SKU sells out after the failover; with this column's slow sales it may not",
	},
	ClockJump: {
		// Seen in a quick run (seed 1): 30 holders refused by the check,
		// and one lost update from a jump that landed after a check.
		"lua+check": "the check before the write finds a lease a jump cut short, unless the jump lands between a holder's check and its write",
	},
}

// lateExtend is why a broken variant's long-work-watchdog cell can go either
// way.
const lateExtend = "a watchdog extend that comes late (a busy machine, and this variant's waiters do not queue: they all keep trying) lets a successor in, " +
	"and the broken renewal (PEXPIRE without owner check) extends the successor's key and never reports the lease lost; or no extend comes late"

// noClaim are the cells the runner shows but docs/design.md makes no promise
// about: redlock+fence is promised to hold under node-restart only "with
// restart awareness", and docs/design.md warns that without it tokens can go
// backwards. lua+check under long-work sells nothing at all: every holder's
// check finds its validity gone before the write (409 lease_lost), safe and
// useless, so there is no sale to judge.
var noClaim = map[string][]string{
	NodeRestartUnaware: {"redlock+fence"},
	LongWork:           {"lua+check"},
}

// sameRow are rows declared as another's. The attendees' starter rung
// (lock/attendee.go) takes a lock that is held, so as shipped it breaks
// wherever no lock at all does: its flaws are for them to fix, and then its
// cells are judged as lua's (Config.JudgeAs).
var sameRow = map[string]string{lock.Attendee: lock.None}

// EitherWhy says why a cell can go either way; "" for a cell that cannot.
func EitherWhy(variant, scenario string) string { return eitherWay[scenario][variant] }

// Expected is the outcome docs/design.md expects of variant under scenario, and
// false for a cell that is not in the matrix.
func Expected(variant, scenario string) (Outcome, bool) {
	breaks, ok := expected[scenario]
	if !ok || !slices.Contains(Variants, variant) {
		return "", false
	}
	for _, s := range Scenarios(time.Second) {
		if s.Name == scenario && !s.Applies(variant) {
			return "", false
		}
	}
	if row, ok := sameRow[variant]; ok {
		variant = row
	}
	if _, ok := eitherWay[scenario][variant]; ok {
		return Either, true
	}
	if slices.Contains(breaks, variant) {
		return Breaks, true
	}
	if slices.Contains(noClaim[scenario], variant) {
		return NoClaim, true
	}
	return Holds, true
}

// batchNote is how a run with batching on is judged.
const batchNote = "a batch takes one lease for the orders that queued in one instance, so a lease guards a batch instead of an order: " +
	"every cell that holds still holds, none still breaks (its instances still race each other), and the broken rungs' cells may go either way " +
	"(their flaw is unchanged, but a fault that fires once a lease now meets a batch, and fewer leases mean fewer chances to land in the race)"

// ExpectedBatched is the outcome expected of variant under scenario when
// every order is batched under one lease (the app's -batch): what Expected
// says, except that a broken rung's "breaks" becomes "either" (batchNote).
// A cell that holds must still hold: batching changes how many orders a
// lease guards, never what guards them; and none must still break.
func ExpectedBatched(variant, scenario string) (Outcome, bool) {
	exp, ok := Expected(variant, scenario)
	row := variant
	if r, same := sameRow[variant]; same {
		row = r
	}
	if ok && exp == Breaks && row != lock.None {
		exp = Either
	}
	return exp, ok
}

// pick resolves a comma-separated selection against the known names, in the
// known order; empty or "all" selects everything.
func pick(sel string, known []string) ([]string, error) {
	if sel == "" || sel == "all" {
		return slices.Clone(known), nil
	}
	want := map[string]bool{}
	for _, s := range strings.Split(sel, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("unknown name %q (known: %s)", s, strings.Join(known, ", "))
		}
		want[s] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty selection %q", sel)
	}
	return out, nil
}
