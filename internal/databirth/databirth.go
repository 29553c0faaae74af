// Package databirth is the marker by which a Redis node's data tell how
// long they have been complete: since when the node holds every key
// written to it. Restart awareness (package lock) keeps a node out of
// Redlock's quorums until its data are older than the largest lease TTL in
// use; whoever starts a node empty may mark it at once (Script), and
// otherwise the first client that meets it does.
//
// The marker is one key, outside every lock namespace because the data are
// the node's, not one application's: Key = "<run_id> <birth ms> <ledger>",
// the node's own run_id, its own clock and its operator ledger (Ledger).
// It is a datum like the locks:
//   - it survives what the locks survive (an AOF or RDB reload), but a
//     reloaded node has a new run_id, so the first meeting re-marks it: a
//     reload may have lost the last writes before the stop;
//   - FLUSHALL, FLUSHDB and a data directory wiped take it with the locks;
//   - a replica promoted by Sentinel carries its old master's marker,
//     replicated, whose run_id is not its own: it is re-marked, and the
//     writes replication held back are covered;
//   - another server at the same address has its own run_id, and no
//     marker of ours or one with its own run_id: it is marked, or counts
//     from when it was marked, on its own data;
//   - an operator command that can remove, roll back or hide keys without
//     touching the marker (an eviction policy switched on, DEBUG RELOAD
//     NOSAVE, a full resync) moves the ledger, so the node is re-marked;
//   - a reset of the counts the ledger reads (CONFIG RESETSTAT, which a
//     monitoring job may run) could hide such a command: so the ledger also
//     carries every call the node has counted, which only grows while no
//     reset happens, and a total below the largest one seen (kept on the node
//     beside the marker, SeenKey, and by each client) is a reset: re-marked.
//
// Ages are read on the node's clock alone (the birth and now both come
// from its TIME): no client's clock is compared with the node's. A jump of
// the node's clock changes the age all the same; nothing here can see it.
package databirth

import (
	"cmp"
	"strconv"
	"strings"
)

// Key is where the marker lives on every node.
const Key = "flashsale:data-born"

// SeenKey holds the largest total of calls (Ledger's calls) that a meeting
// has read on the node since its marker was written: a total below it
// means the counts were reset.
const SeenKey = "flashsale:data-born:calls"

// Watched are the commands by which an operator can remove, roll back or
// hide keys on a running node, or take away what the lock reads there,
// without breaking a connection: flushes, SWAPDB, replication and
// failover (a full resync replaces the data), DEBUG (RELOAD NOSAVE and
// LOADAOF load an older copy), CONFIG SET (an eviction policy, keyspace
// notifications off), CONFIG RESETSTAT (which resets these counts), SCRIPT
// FLUSH and ACL changes. Their call counts, read from INFO
// commandstats, are the node's operator ledger (Ledger): a node whose
// ledger moved may have lost keys that no marker shows, so it counts as
// born anew. A restart or SHUTDOWN needs no entry: it changes the run_id;
// nor does CLIENT KILL, which loses no key and breaks the connections it
// kills, so they meet the node again.
var Watched = []string{
	"flushall", "flushdb", "swapdb", "replicaof", "slaveof", "failover", "debug",
	"config|set", "config|resetstat", "script|flush",
	"acl|setuser", "acl|deluser", "acl|load",
}

// Ledger is the operator ledger in an INFO commandstats reply: the calls of
// each Watched command, in that order, joined by dots; and calls, every call
// of every command the reply counts, which only grows until the counts are
// reset. It is read after every vote that can count, so it walks the reply
// once and keeps nothing of it but the counts.
func Ledger(commandstats string) (ledger string, calls int64) {
	watched := make([]string, len(Watched))
	for rest := commandstats; rest != ""; {
		var row string
		row, rest, _ = strings.Cut(rest, "\n")
		name, counts, ok := strings.Cut(strings.TrimPrefix(row, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(counts, ",")
		n = strings.TrimSpace(n)
		c, _ := strconv.ParseInt(n, 10, 64)
		calls += c
		if i, ok := watchedAt[name]; ok {
			watched[i] = n
		}
	}
	var b strings.Builder
	b.Grow(2 * len(watched))
	for i, n := range watched {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(cmp.Or(n, "0"))
	}
	return b.String(), calls
}

// watchedAt is each Watched command's place in the ledger.
var watchedAt = func() map[string]int {
	m := make(map[string]int, len(Watched))
	for i, name := range Watched {
		m[name] = i
	}
	return m
}()

// Script marks the node if its marker is missing, names another run_id or
// another operator ledger, or the node's total of calls is below the largest
// one seen since the marker was written (the counts were reset, which could
// hide an operator command): its data may have lost keys, so they are
// complete from now on. It returns {birth ms, now ms, ledger, calls} on the
// node's clock; the data's age is the difference of the first two. The
// marker's value is "<run_id> <birth ms> <ledger>". KEYS[1] is Key, KEYS[2]
// SeenKey; ARGV[1] and ARGV[2], optional, are the largest total of calls the
// caller has read on the node and the birth of the data it read it on (a
// reset the caller saw is one the node may no longer show). It
// needs INFO and TIME in scripts (Redis 5 and later replicate a script's
// effects, so a script may read the clock and then write).
var Script = `
local watched = {"` + strings.Join(Watched, `", "`) + `"}
local stats = redis.call("info", "commandstats")
local counted = {}
local calls = 0
for name, n in string.gmatch(stats, "cmdstat_([^:]+):calls=(%d+)") do
	counted[name] = n
	calls = calls + tonumber(n)
end
local ledger = {}
for i, name in ipairs(watched) do
	ledger[i] = counted[name] or "0"
end
ledger = table.concat(ledger, ".")
local id = string.match(redis.call("info", "server"), "run_id:(%x+)")
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seen = tonumber(redis.call("get", KEYS[2]) or "0")
local v = redis.call("get", KEYS[1])
if v then
	local was, born, led = string.match(v, "^(%x+) (%d+) (%S+)$")
	if born == ARGV[2] then
		seen = math.max(seen, tonumber(ARGV[1]))
	end
	if was == id and led == ledger and calls >= seen then
		redis.call("set", KEYS[2], math.max(seen, calls))
		return {tonumber(born), now, ledger, calls}
	end
end
redis.call("set", KEYS[1], id .. " " .. now .. " " .. ledger)
redis.call("set", KEYS[2], calls)
return {now, now, ledger, calls}`
