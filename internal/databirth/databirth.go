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
//     NOSAVE, a full resync) moves the ledger, so the node is re-marked.
//
// Ages are read on the node's clock alone (the birth and now both come
// from its TIME): no client's clock is compared with the node's. A jump of
// the node's clock changes the age all the same; nothing here can see it.
package databirth

import (
	"cmp"
	"strings"
)

// Key is where the marker lives on every node.
const Key = "flashsale:data-born"

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
// each Watched command, in that order, joined by dots. It is read after
// every vote that can count, so it walks the reply once and keeps nothing
// of it but the counts.
func Ledger(commandstats string) string {
	calls := make([]string, len(Watched))
	for rest := commandstats; rest != ""; {
		var row string
		row, rest, _ = strings.Cut(rest, "\n")
		name, counts, ok := strings.Cut(strings.TrimPrefix(row, "cmdstat_"), ":calls=")
		if i, watched := watchedAt[name]; ok && watched {
			n, _, _ := strings.Cut(counts, ",")
			calls[i] = strings.TrimSpace(n)
		}
	}
	var b strings.Builder
	b.Grow(2 * len(calls))
	for i, n := range calls {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(cmp.Or(n, "0"))
	}
	return b.String()
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
// another operator ledger (its data may have lost keys: they are complete
// from now on), and returns {birth ms, now ms, ledger} on the node's clock;
// its age is the difference of the first two. The marker's value is
// "<run_id> <birth ms> <ledger>". KEYS[1] is Key. It needs INFO and TIME in
// scripts (Redis 5 and later replicate a script's effects, so a script may
// read the clock and then write).
var Script = `
local watched = {"` + strings.Join(Watched, `", "`) + `"}
local stats = redis.call("info", "commandstats")
local calls = {}
for i, name in ipairs(watched) do
	calls[i] = string.match(stats, "cmdstat_" .. name .. ":calls=(%d+)") or "0"
end
local ledger = table.concat(calls, ".")
local id = string.match(redis.call("info", "server"), "run_id:(%x+)")
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call("get", KEYS[1])
if v then
	local was, born, led = string.match(v, "^(%x+) (%d+) (%S+)$")
	if was == id and led == ledger then
		return {tonumber(born), now, ledger}
	end
end
redis.call("set", KEYS[1], id .. " " .. now .. " " .. ledger)
return {now, now, ledger}`
