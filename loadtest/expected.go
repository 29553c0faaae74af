package loadtest

import (
	"slices"
	"time"

	"flashsale/lock"
)

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
