package curriculum

import (
	"flashsale/inventory"
	"flashsale/lock"
	"flashsale/lock/ladder"
)

// lessons is the table: every rung of lock's ladder, by name, with what a
// lesson or a run expects of it (its paragraph is why/<rung>.md). A rung
// holds in every column its entry does not name.
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
var lessons = map[string]Lesson{
	ladder.None: {
		Reference: "lua.go",
		ShowsWith: "clean",
		Breaks:    []string{"clean", "crash-between-steps", "pause-between-release-steps", "pause-in-critical-section", "node-down", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "long-work-watchdog", "pause-after-lease-check"},
		Chaos:     &ChaosClaim{Alone: true},
	},
	ladder.SetNXExpire: {
		Reference: "lua.go",
		ShowsWith: "crash-between-steps",
		Breaks:    []string{"crash-between-steps", "pause-in-critical-section", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "pause-after-lease-check"},
		Either: map[string]string{
			"pause-between-release-steps": "a wait deadline can land between SETNX and EXPIRE and leave a key with no TTL (the variant's real flaw), or not",
			"long-work-watchdog": "waiters reach their wait deadline all the time here, and one landing between SETNX and EXPIRE leaves a key with no TTL; " +
				"and a late extend is renewed on the successor's key (PEXPIRE without owner check), whose lock the bare DEL then frees",
		},
		// Anything that lands between SETNX and EXPIRE (a crash, a wait
		// deadline, a reply lost to a paused or cut-off node) leaves a key
		// with no TTL: every fault can break it.
		Chaos: &ChaosClaim{Breakers: []string{AnyFault}},
	},
	ladder.GetDel: {
		Reference: "lua.go",
		ShowsWith: "pause-between-release-steps",
		Breaks:    []string{"pause-between-release-steps", "pause-in-critical-section", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "pause-after-lease-check"},
		Either: map[string]string{
			"long-work-watchdog": lateExtend,
		},
		Chaos: &ChaosClaim{Breakers: singleBreakers},
	},
	ladder.PlainDel: {
		Reference: "lua.go",
		ShowsWith: "pause-in-critical-section",
		Breaks:    []string{"pause-in-critical-section", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "pause-after-lease-check"},
		Either: map[string]string{
			"long-work-watchdog": lateExtend + ", whose lock the bare DEL then frees",
		},
		Chaos: &ChaosClaim{Breakers: singleBreakers},
	},
	lock.Lua: {
		Reference: "lua.go",
		ShowsWith: "pause-in-critical-section",
		Breaks:    []string{"pause-in-critical-section", "node-restart", "clock-jump", "network-delay", "failover", "long-work", "pause-after-lease-check"},
		Chaos:     &ChaosClaim{Breakers: singleBreakers},
	},
	lock.Redlock: {
		Reference: "redlock.go",
		ShowsWith: "pause-in-critical-section",
		Breaks:    []string{"pause-in-critical-section", "node-restart-unaware", "clock-jump", "long-work", "pause-after-lease-check", "failover-unaware"},
		// It checks its validity (a late grant is refused) and tolerates a
		// minority of nodes crashed, wiped, flushed, paused or cut off; it
		// cannot tell a holder that stopped past its TTL, nor a majority
		// whose clocks jumped. Without awareness a node that lost its data
		// (wiped, flushed, crashed past its last fsync, a replica promoted
		// without the lease) votes at once.
		Chaos: &ChaosClaim{
			Breakers: []string{"app-pause", "clock-jump"},
			Unaware:  []string{"node-wipe", "node-crash", "node-flush", "node-operator", "node-failover"},
		},
	},
	ladder.LuaCheck: {
		Reference: "lua.go",
		ShowsWith: "pause-after-lease-check",
		Breaks:    []string{"pause-after-lease-check"},
		Either: map[string]string{
			"node-restart": "the check before the write finds a lease the restart erased, unless the restart lands between a holder's check and its write",
			"clock-jump":   "the check before the write finds a lease a jump cut short, unless the jump lands between a holder's check and its write",
			"failover":     "the check before the write asks the promoted master and finds the second holder's value, unless the failover lands between a holder's check and its write",
		},
		// Under long-work every holder's check finds its validity gone before
		// the write (409 lease_lost): safe and useless, no sale to judge.
		NoClaim: []string{"long-work"},
	},
	lock.LuaFence: {
		Reference: "lua.go",
		ShowsWith: "pause-in-critical-section",
		Chaos:     &ChaosClaim{},
	},
	lock.RedlockFence: {
		Reference: "redlock.go",
		ShowsWith: "pause-in-critical-section",
		// Promised to hold under node-restart and failover only with restart awareness:
		// without it tokens can go backwards.
		NoClaim: []string{"node-restart-unaware", "failover-unaware"},
		Chaos:   &ChaosClaim{},
	},
	inventory.DBGuard: {
		Reference: "inventory/db_guard.go",
		ShowsWith: "pause-in-critical-section",
	},
	inventory.DBForUpdate: {
		Reference: "inventory/for_update.go",
		ShowsWith: "pause-in-critical-section",
		Skips: map[string]string{
			"failover": "no Redis to fail over; the column's 10 s critical sections under its row lock only time requests out",
		},
	},
	inventory.RedisStock: {
		Reference: "inventory/redis_stock.go",
		ShowsWith: "node-restart",
		Disagrees: "its answers come from the stock it reserves in Redis, its stock and seat reads from the row, " +
			"which follows after the work: in between a shopper can be told sold out, or taken, and then read stock, or a free seat",
		Either: map[string]string{
			"failover": "the promoted replica has the stock as it was when replication stopped, so the units sold since are sold again " +
				"(oversold) if the SKU sells out after the failover; with this column's slow sales it may not",
		},
	},
	// The article's Redlock: a quorum of 2 whatever the number of nodes,
	// so with five nodes two clients can each win two. Concurrency alone
	// breaks it wherever five nodes (or a side of three) answer, which
	// every column has for a good part of its run; the bare DEL, the
	// undone-nothing miss and the whole-TTL check only add ways.
	ladder.ArticleRedlock: {
		Reference: "redlock.go",
		ShowsWith: "clean",
		Breaks: []string{"clean", "crash-between-steps", "pause-between-release-steps", "pause-in-critical-section", "node-down",
			"node-restart", "node-restart-unaware", "clock-jump", "network-delay", "partition", "long-work", "long-work-watchdog", "pause-after-lease-check"},
		Either: map[string]string{
			"failover":         articleFailover,
			"failover-unaware": articleFailover,
		},
		Chaos: &ChaosClaim{Alone: true},
	},
	// redsync: a careful Redlock (majority, parallel SETs under a per-node
	// timeout, validity with drift, owner-checked scripts, a missed try
	// undone), so it holds wherever redlock holds for the same reasons,
	// except where redlock's restart awareness is what holds: it has none,
	// so its aware and unaware columns are the same cell. No fencing: a
	// holder paused past its TTL writes beside its successor. No watchdog
	// of its own: long work loses the lease unless the caller extends it
	// (long-work-watchdog: the watchdog here calls its Extend, owner-checked).
	ladder.Redsync: {
		Reference: "redlock.go",
		// The cell that shows it is the one it passes: it sells exactly the
		// stock under concurrency alone, where article-redlock does not.
		ShowsWith: "clean",
		// Each of these needs only a successor granted while the first
		// holder still works, which its flaws let in: a pause past the TTL
		// (no fencing), a jump that expires a lease at work, work past the
		// TTL (no watchdog), a node back without its data (no restart
		// awareness: aware and unaware are the same cell for it).
		Breaks: []string{"pause-in-critical-section", "pause-after-lease-check", "clock-jump", "long-work",
			"node-restart", "node-restart-unaware"},
		Either: map[string]string{
			"failover":         redsyncFailover,
			"failover-unaware": redsyncFailover,
		},
		Chaos: &ChaosClaim{
			Breakers: []string{"app-pause", "clock-jump", "node-wipe", "node-crash", "node-flush", "node-operator", "node-failover"},
		},
	},
	// Last, past the ladder: the attendees' own single-node rung, read
	// beside the one it should become. As shipped it takes a lock that is
	// held, so it breaks wherever no lock at all does: its row is none's
	// until the attendees fix it, and then its cells are judged as lua's.
	ladder.Attendee: {
		Reference: "lua.go",
		ShowsWith: "clean",
		JudgedAs:  ladder.None,
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

// lateExtend is why a broken rung's long-work-watchdog cell can go either
// way.
const lateExtend = "a watchdog extend that comes late (a busy machine, and this variant's waiters do not queue: they all keep trying) lets a successor in, " +
	"and the broken renewal (PEXPIRE without owner check) extends the successor's key and never reports the lease lost; or no extend comes late"

// articleFailover is why the article's Redlock can go either way under
// failover.
const articleFailover = "its critical sections are 10 s long, so a key sees few rushes of waiters, and two holders need two of them to split " +
	"the nodes 2 and 2 (or a promoted replica to give a second client its second vote); a missed quorum's keys stay 30 s and can make that split, or not"

// redsyncFailover is why redsync can go either way under failover.
const redsyncFailover = "a promoted replica without the lease gives a second client its vote, and nothing in redsync stops it; but the column's second " +
	"holder must be granted in the seconds between the healing of the cut and the end of the first holder's 10 s section, and redsync's tries, " +
	"50–250 ms apart over go-redis clients with their defaults (a 3 s read timeout that its per-node deadline does not shorten), may all miss them"

// singleBreakers are the chaos faults that can break a single-node rung
// without fencing: a holder paused past its TTL, a jump that expires its
// key, a grant that arrives after its lease ran out, and a failover whose
// promoted replica lacks the key of a lease still at work.
var singleBreakers = []string{"app-pause", "clock-jump", "net-delay", "node-failover"}
