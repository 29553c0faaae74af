package lock

import "slices"

// Variant names, in ladder order.
const (
	None         = "none"
	SetNXExpire  = "setnx-expire"
	GetDel       = "get-del"
	PlainDel     = "plain-del"
	Lua          = "lua"
	Redlock      = "redlock"
	LuaCheck     = "lua+check"
	LuaFence     = "lua+fence"
	RedlockFence = "redlock+fence"
	// Attendee is the rung the workshop's attendees write (attendee.go).
	Attendee    = "attendee"
	DBGuard     = "db-guard"
	DBForUpdate = "db-for-update"
	RedisStock  = "redis-stock"
)

// Guard is what keeps a rung's sale correct: the Redis lock, or a guard on
// the store side that the inventory applies in place of any lock. The
// store-guarded rungs take no Redis lock at all (like none); the inventory
// picks its write path from this field, never from the rung's name.
type Guard int

// Guards.
const (
	// GuardLock: the Redis lock (and, for a fenced rung, the store's token
	// check) is the guard; the store writes what the holder read.
	GuardLock Guard = iota
	// GuardConditional: one conditional write in the order's transaction
	// (UPDATE … SET stock = stock − q WHERE … AND stock >= q; a seat row
	// marked booked only where it is not yet).
	GuardConditional
	// GuardRowLock: the row is locked in the transaction (SELECT … FOR
	// UPDATE on PostgreSQL; on SQLite the immediate transaction is the
	// lock) while the sale reads, checks, works and writes.
	GuardRowLock
	// GuardRedisStock: the stock lives in Redis and is reserved there by a
	// Lua check-and-DECRBY (a seat by SET NX) before the database write;
	// a failed write gives it back.
	GuardRedisStock
)

// Rung is one variant of the teaching ladder. The ladder is declared here,
// once, as one table: the lockers, the variant names, the correct rungs the
// production mode allows, the workshop's side-by-side source view and its
// paragraphs, the workshop's sequence and the load runner's expected matrix
// all read it. Adding a rung is its file and one entry in ladder.
type Rung struct {
	Name string // as in the X-Lock-Variant header
	// File is the file of this package that implements the rung; Reference
	// is the file of the correct rung it is read beside. A broken rung's file
	// differs from its reference by its flaw; a fenced rung's file holds only
	// what fencing adds to the rung it builds on.
	// A store-guarded rung's File and Reference are the same file of
	// package inventory, named "inventory/…": it is correct on its own.
	File, Reference string
	// Fenced rungs issue fencing tokens that the store must check.
	Fenced bool
	// Guard is what keeps the sale correct; any other than GuardLock means
	// the rung takes no Redis lock and the store guards instead.
	Guard Guard
	// Correct rungs keep the sale right under the faults their design
	// answers; the production mode allows only these.
	Correct bool

	// ShowsWith is the matrix column (a scenario name) the workshop shows
	// the rung under: the one that breaks it, or, for a correct rung, the
	// one that breaks the rung before it.
	ShowsWith string
	// Why is the workshop's paragraph on the rung: why it breaks, or why
	// it holds.
	Why string

	// Breaks are the matrix columns in which the rung breaks; Either are
	// those where it may go either way, with why; NoClaim those where it is
	// run and shown but promised nothing. It holds in every other column
	// that applies to it.
	Breaks  []string
	Either  map[string]string
	NoClaim []string
	// JudgedAs names the rung whose row of the matrix this one is judged
	// by, when it is not its own; the rung's own Either cells go either
	// way all the same.
	JudgedAs string
	// Quorum rungs ask a majority of the nodes (Redlock): only they have
	// cells in the columns that split the nodes between instances or turn
	// restart awareness off, which no single-node rung has.
	Quorum bool
	// Skips are the matrix columns the rung has no cell in, with why.
	Skips map[string]string

	// Chaos is what the chaos runner expects of the rung under its
	// nemesis; nil: it is run and shown there, promised nothing.
	Chaos *ChaosClaim

	build func(s *Lockers) variant
}

// Outcome is what a cell of the load runner's matrix does: the sale holds,
// or it breaks.
type Outcome string

// Outcomes.
const (
	// Holds: no overselling, no lost update, no double booking, no stuck
	// lock, no order lost or invented (503s are allowed).
	Holds Outcome = "holds"
	// Breaks: at least one of those, coming out of the real race.
	Breaks Outcome = "breaks"
	// NoClaim: the design promises nothing for the cell; it is run and
	// shown, not judged.
	NoClaim Outcome = "no claim"
	// Either: the cell can hold or break depending on timing the runner
	// does not control (the rung's Either says why); it is run and shown,
	// and either outcome is as expected.
	Either Outcome = "either"
)

// Expect is what the rung does under the matrix column scenario, by its own
// row (JudgedAs is the caller's to follow).
func (r Rung) Expect(scenario string) Outcome {
	switch {
	case r.Either[scenario] != "":
		return Either
	case slices.Contains(r.Breaks, scenario):
		return Breaks
	case slices.Contains(r.NoClaim, scenario):
		return NoClaim
	default:
		return Holds
	}
}

// lateExtend is why a broken rung's long-work-watchdog cell can go either
// way.
const lateExtend = "a watchdog extend that comes late (a busy machine, and this variant's waiters do not queue: they all keep trying) lets a successor in, " +
	"and the broken renewal (PEXPIRE without owner check) extends the successor's key and never reports the lease lost; or no extend comes late"

// ladder is the teaching order: no lock, the three broken patterns, the
// correct single-node lock, Redlock, the single-node lock that checks its
// lease before writing, then both locks with fencing tokens; then the
// designs that need no Redis lock at all, where the store is the guard;
// last, the rung the attendees write.
//
// Why the columns come out as they do, beyond each rung's paragraph:
// under partition each side still reaches a majority of its own, and two
// majorities of five always share a node, so both Redlock rungs hold. The
// rungs without a lock break in no column: the store is their guard, so no
// fault on a lock or a Redis node can let two buyers take one unit
// (redis-stock under node-restart holds by refusing: node 0 comes back
// without the stock, and its sales answer 503 until a reset seeds it
// again). lua+fence under node-restart and failover: the node lost its
// fence counter, so the store refuses the lower tokens, unavailable and
// never unsafe. Under long-work-watchdog the watchdog keeps every lease
// while its holder works; the broken rungs renew with PEXPIRE and no owner
// check, but that renews a successor's key only once a lease is lost.
var ladder = []Rung{
	{
		Name: None, File: "none.go", Reference: "lua.go",
		build:     func(*Lockers) variant { return noLock{} },
		ShowsWith: "clean",
		Why: "No lock at all: every request reads the stock, does its work and writes stock minus quantity. " +
			"Two requests that read the same stock both sell from it, and the later write overwrites the earlier one: " +
			"lost updates and overselling from concurrency alone, with no fault needed, in every scenario.",
		Breaks: []string{"clean", "crash-between-steps", "pause-between-release-steps", "pause-in-critical-section", "node-down", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "long-work-watchdog", "pause-after-lease-check"},
		Chaos:  &ChaosClaim{Alone: true},
	},
	{
		Name: SetNXExpire, File: "setnx_expire.go", Reference: "lua.go",
		build:     func(s *Lockers) variant { return setnxExpire{s.first()} },
		ShowsWith: "crash-between-steps",
		Why: "SETNX k v and EXPIRE k ttl are two commands. A client that dies between them leaves a lock key with no TTL: " +
			"nobody ever acquires it again, and every later buyer of that SKU waits and gets 503 busy — a deadlock that " +
			"outlives the crashed process (crash-between-steps). Its release is a bare DEL, so a holder paused past its TTL " +
			"also deletes its successor's lock. lua.go creates the key and its TTL in one SET k v NX PX ttl.",
		Breaks: []string{"crash-between-steps", "pause-in-critical-section", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "pause-after-lease-check"},
		Either: map[string]string{
			// Seen in a full run (seed 42): releases paused past the TTL make
			// waiters wait their whole budget; a wait deadline that lands
			// between SETNX and EXPIRE leaves a key with no TTL.
			"pause-between-release-steps": "a wait deadline can land between SETNX and EXPIRE and leave a key with no TTL (the variant's real flaw), or not",
			"long-work-watchdog": "waiters reach their wait deadline all the time here, and one landing between SETNX and EXPIRE leaves a key with no TTL; " +
				"and a late extend is renewed on the successor's key (PEXPIRE without owner check), whose lock the bare DEL then frees",
		},
		// Anything that lands between SETNX and EXPIRE (a crash, a wait
		// deadline, a reply lost to a paused or cut-off node) leaves a key
		// with no TTL: every fault can break it.
		Chaos: &ChaosClaim{Breakers: []string{AnyFault}},
	},
	{
		Name: GetDel, File: "get_del.go", Reference: "lua.go",
		build:     func(s *Lockers) variant { return getDel{s.first()} },
		ShowsWith: "pause-between-release-steps",
		Why: "The acquire is right (SET k v NX PX ttl), but the release checks and deletes in two commands: GET k, compare " +
			"with our value, then DEL k. A holder that stalls between them for longer than the TTL finds its lock expired " +
			"and taken by another client, and its DEL removes the new holder's lock; a third client walks in beside the " +
			"second. Two holders sell the same stock (pause-between-release-steps). lua.go runs the compare and the delete " +
			"as one Lua script, which nothing can interrupt.",
		Breaks: []string{"pause-between-release-steps", "pause-in-critical-section", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "pause-after-lease-check"},
		Either: map[string]string{
			"long-work-watchdog": lateExtend,
		},
		Chaos: &ChaosClaim{Breakers: singleBreakers},
	},
	{
		Name: PlainDel, File: "plain_del.go", Reference: "lua.go",
		build:     func(s *Lockers) variant { return plainDel{s.first()} },
		ShowsWith: "pause-in-critical-section",
		Why: "Releases with a bare DEL k and never checks that the lock is still its own. A holder whose critical section " +
			"outlives its TTL comes back and deletes the lock its successor now holds, letting a third client in beside the " +
			"second: two holders at once, overselling (pause-in-critical-section). lua.go deletes the key only while it " +
			"still carries the holder's own random value.",
		Breaks: []string{"pause-in-critical-section", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "pause-after-lease-check"},
		Either: map[string]string{
			"long-work-watchdog": lateExtend + ", whose lock the bare DEL then frees",
		},
		Chaos: &ChaosClaim{Breakers: singleBreakers},
	},
	{
		Name: Lua, File: "lua.go", Reference: "lua.go", Correct: true,
		build:     func(s *Lockers) variant { return luaLock{s.first()} },
		ShowsWith: "pause-in-critical-section",
		Why: "The correct single-node lock: SET k <random> NX PX ttl, released and extended by Lua scripts that compare the " +
			"owner value and act in one atomic step, so no other client's lock is ever deleted. It still breaks when a " +
			"holder pauses inside its critical section past the TTL (a GC pause, swap, SIGSTOP): the lease expires, a " +
			"successor acquires, and the paused holder wakes believing it still holds the lock and writes stale stock. No " +
			"lock alone can prevent that; the store must refuse the stale write (lua+fence). And one Redis node is one point " +
			"of failure: restarted without its data, it forgets the lock (node-restart).",
		Breaks: []string{"pause-in-critical-section", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "pause-after-lease-check"},
		Chaos:  &ChaosClaim{Breakers: singleBreakers},
	},
	{
		Name: Redlock, File: "redlock.go", Reference: "redlock.go", Correct: true,
		build:     func(s *Lockers) variant { return s.redlock() },
		ShowsWith: "pause-in-critical-section",
		Why: "SET NX PX on N independent masters in parallel, each under a short timeout; the lock is held when a quorum " +
			"(N/2+1) granted it and time is left (validity = ttl − elapsed − drift), so a minority of nodes can be down. " +
			"A node that lost its data inside a lease held by a bare quorum (restarted without it, or a replica promoted by " +
			"Sentinel before the grant reached it) has forgotten the grant and can vote for a second client — two holders — " +
			"unless the client is restart-aware: a node whose data are younger than TTL + drift does not vote, whichever " +
			"client asks. Like lua, it cannot stop a holder paused past its TTL from writing stale stock: that needs fencing.",
		Breaks: []string{"pause-in-critical-section", "node-restart-unaware", "clock-jump", "long-work", "pause-after-lease-check", "failover-unaware"},
		Quorum: true,
		// It checks its validity (a late grant is refused) and tolerates a
		// minority of nodes crashed, wiped, flushed, paused or cut off; it
		// cannot tell a holder that stopped past its TTL, nor a majority
		// whose clocks jumped. Without awareness a node that lost its data
		// (wiped, flushed, crashed past its last fsync, a replica promoted
		// without the lease) votes at once.
		Chaos: &ChaosClaim{
			Breakers: []string{"app-pause", "clock-jump"},
			Unaware:  []string{"node-wipe", "node-crash", "node-flush", "node-failover"},
		},
	},
	{
		Name: LuaCheck, File: "lua_check.go", Reference: "lua.go",
		build:     func(s *Lockers) variant { return luaCheck{luaLock{s.first()}} },
		ShowsWith: "pause-after-lease-check",
		Why: "lua whose holder checks its lease just before it writes, as many implementations advise: is there validity " +
			"left, and does GET k still return our value? A holder paused inside its work past the TTL wakes, checks, finds " +
			"the lease gone and writes nothing (409 lease_lost), so pause-in-critical-section holds. But the check and the " +
			"write are two steps: a pause between them (pause-after-lease-check) lets a holder check \"still mine\", stall " +
			"past the TTL and write beside its successor. The check narrows the window; only the store's fencing-token " +
			"check closes it. Under long-work it sells nothing at all: every lease has run out by the check; that needs the watchdog.",
		Breaks: []string{"pause-after-lease-check"},
		Either: map[string]string{
			"node-restart": "the check before the write finds a lease the restart erased, unless the restart lands between a holder's check and its write",
			// Seen in a quick run (seed 1): 30 holders refused by the check,
			// and one lost update from a jump that landed after a check.
			"clock-jump": "the check before the write finds a lease a jump cut short, unless the jump lands between a holder's check and its write",
			// The first holder's check asks the new master, which by then
			// holds the second holder's value.
			"failover": "the check before the write asks the promoted master and finds the second holder's value, unless the failover lands between a holder's check and its write",
		},
		// Under long-work every holder's check finds its validity gone before
		// the write (409 lease_lost): safe and useless, no sale to judge.
		NoClaim: []string{"long-work"},
	},
	{
		Name: LuaFence, File: "lua_fence.go", Reference: "lua.go", Fenced: true, Correct: true,
		build:     func(s *Lockers) variant { return luaFence{luaLock{s.first()}} },
		ShowsWith: "pause-in-critical-section",
		Why: "lua with fencing tokens: the same Lua step that sets the lock draws a token from a counter on the node, and the " +
			"store raises the row's fence to that token before reading and writes only while the row still carries it. A " +
			"holder paused past its TTL can still overlap its successor on the timeline, but its write carries an older " +
			"token and is refused (409 stale_fence): the pause no longer oversells. If the node restarts without its " +
			"counter, the new tokens are lower and the store refuses them too: sales stop (unavailable), never unsafe.",
		Chaos: &ChaosClaim{},
	},
	{
		Name: RedlockFence, File: "redlock_fence.go", Reference: "redlock.go", Fenced: true, Correct: true,
		build:     func(s *Lockers) variant { return redlockFence{s.redlock()} },
		ShowsWith: "pause-in-critical-section",
		Why: "Redlock with fencing tokens. Each node draws a token from its own counter with its SET; the lease takes the " +
			"largest of its quorum and writes it back as max(counter, token) to a majority of the nodes that still hold the " +
			"lease, so any later quorum meets a counter past it and tokens only grow from holder to holder. A restarted node " +
			"is re-seeded from a majority before it counts again. The store checks the token around its read-modify-write, " +
			"so neither a paused holder nor a restarted node can oversell.",
		// Promised to hold under node-restart and failover only with restart awareness:
		// without it tokens can go backwards.
		NoClaim: []string{"node-restart-unaware", "failover-unaware"},
		Quorum:  true,
		Chaos:   &ChaosClaim{},
	},
	{
		Name: DBGuard, File: "inventory/db_guard.go", Reference: "inventory/db_guard.go", Guard: GuardConditional, Correct: true,
		build:     func(*Lockers) variant { return noLock{} },
		ShowsWith: "pause-in-critical-section",
		Why: "No Redis lock at all: one conditional statement in the order's transaction, UPDATE products SET stock = stock − q " +
			"WHERE sku = ? AND stock >= q (a seat: UPDATE seats SET booked = TRUE WHERE … AND booked = FALSE). The database applies " +
			"it atomically, so the last unit is sold once whoever pauses where: a refused statement is a 409, never an oversell, " +
			"in every scenario. What it does not do is keep the business work (a payment call) from running for two buyers of " +
			"the last unit: both work, then one of them finds the stock gone. A lock still buys that.",
	},
	{
		Name: DBForUpdate, File: "inventory/for_update.go", Reference: "inventory/for_update.go", Guard: GuardRowLock, Correct: true,
		build:     func(*Lockers) variant { return noLock{} },
		ShowsWith: "pause-in-critical-section",
		Why: "The database's own lock: SELECT … FOR UPDATE locks the product's row inside the transaction, which then checks, " +
			"works and writes stock read − q. Nobody else can read that row until the commit, so the read-modify-write is safe " +
			"without Redis. On SQLite there are no row locks: the immediate transaction takes the database's one write lock, " +
			"so every writer waits, not just the SKU's buyers. The cost is the lock held for the whole business work: a pause " +
			"in the critical section stalls every buyer of the SKU (on SQLite, every buyer), slow but never oversold.",
		Skips: map[string]string{
			"failover": "no Redis to fail over; the column's 10 s critical sections under its row lock only time requests out",
		},
	},
	{
		Name: RedisStock, File: "inventory/redis_stock.go", Reference: "inventory/redis_stock.go", Guard: GuardRedisStock, Correct: true,
		build:     func(*Lockers) variant { return noLock{} },
		ShowsWith: "node-restart",
		Why: "The flash-sale guides' design: the stock lives in Redis, and a Lua script checks and DECRBYs it in one step, so " +
			"no unit is reserved twice; then the order is written to the database, and a failed write gives the units back " +
			"(INCRBY). No lock, and the database is touched only by buyers who got a unit. Redis is the guard, so Redis's " +
			"state is the sale's: a node restarted without its data has lost the stock, and sales answer 503 until a reset " +
			"re-seeds it (re-seeding from the database mid-sale would sell the units still in flight twice). The audit's " +
			"redis_stock_drift says when Redis and the database differ.",
		Either: map[string]string{
			// Seen in a run: 39 of 40 sold, none oversold. The column's 8 s
			// sales are slow; the stale stock shows only if the SKU sells out.
			"failover": "the promoted replica has the stock as it was when replication stopped, so the units sold since are sold again " +
				"(oversold) if the SKU sells out after the failover; with this column's slow sales it may not",
		},
	},
	// Last, past the ladder: the attendees' own single-node rung, read
	// beside the one it should become. As shipped it takes a lock that is
	// held, so it breaks wherever no lock at all does: its row is none's
	// until the attendees fix it, and then its cells are judged as lua's.
	{
		Name: Attendee, File: "attendee.go", Reference: "lua.go",
		build:     func(s *Lockers) variant { return attendee{s.first()} },
		ShowsWith: "clean",
		Why: "Your rung (docs/workshop.md, Lab 15), shipped with two flaws. Its acquire reads SET NX's redis.Nil the way GET's " +
			"is read, as \"no such key\"; for SET NX it means nothing was set because someone holds the lock, so as shipped " +
			"everyone gets in and it breaks like no lock at all (clean). Its release then checks with GET and deletes with " +
			"DEL, get-del's flaw (pause-between-release-steps). Fix both in lock/attendee.go, restart the server, and run it " +
			"here; lua.go, beside it, is where it should end up.",
		JudgedAs: None,
		// Its own, over none's row: the one cell where the rung as shipped
		// is not no lock at all.
		Either: map[string]string{
			"long-work-watchdog": "its extend is lua's, owner-checked (not part of the exercise): with the watchdog on, a lease whose acquire " +
				"only seemed to succeed is found lost at its first extend, a third of a TTL in, and the check before the write refuses it " +
				"(409 lease_lost) long before the second of work ends; the flaw shows where the work is shorter than that",
		},
		Skips: map[string]string{
			"failover": "its lab is about the single-node rung's own steps; the failover column's 10 s critical sections add nothing to it",
		},
	},
}

// Ladder lists every rung in teaching order.
func Ladder() []Rung { return slices.Clone(ladder) }

// Names lists every variant name in ladder order.
func Names() []string {
	out := make([]string, len(ladder))
	for i, r := range ladder {
		out[i] = r.Name
	}
	return out
}

// Find is the rung named name.
func Find(name string) (Rung, bool) {
	i := slices.IndexFunc(ladder, func(r Rung) bool { return r.Name == name })
	if i < 0 {
		return Rung{}, false
	}
	return ladder[i], true
}
