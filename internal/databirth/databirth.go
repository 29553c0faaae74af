// Package databirth is the marker by which a Redis node's data tell how
// long they have been complete: since when the node holds every key
// written to it. Restart awareness (package lock) keeps a node out of
// Redlock's quorums until its data are older than the largest lease TTL in
// use; whoever starts a node empty may mark it at once (Script), and
// otherwise the first client that meets it does.
//
// The marker is one key, outside every lock namespace because the data are
// the node's, not one application's: Key = "<run_id> <birth ms>", the
// node's own run_id and its own clock. It is a datum like the locks:
//   - it survives what the locks survive (an AOF or RDB reload), but a
//     reloaded node has a new run_id, so the first meeting re-marks it: a
//     reload may have lost the last writes before the stop;
//   - FLUSHALL, FLUSHDB and a data directory wiped take it with the locks;
//   - a replica promoted by Sentinel carries its old master's marker,
//     replicated, whose run_id is not its own: it is re-marked, and the
//     writes replication held back are covered;
//   - another server at the same address has its own run_id, and no
//     marker of ours or one with its own run_id: it is marked, or counts
//     from when it was marked, on its own data.
//
// Ages are read on the node's clock alone (the birth and now both come
// from its TIME): no client's clock is compared with the node's. A jump of
// the node's clock changes the age all the same; nothing here can see it.
package databirth

// Key is where the marker lives on every node.
const Key = "flashsale:data-born"

// Script marks the node if its marker is missing or names another run_id
// (its data may have lost keys: they are complete from now on), and
// returns {birth ms, now ms} on the node's clock; its age is their
// difference. KEYS[1] is Key. It needs INFO and TIME in scripts (Redis 5
// and later replicate a script's effects, so a script may read the clock
// and then write).
const Script = `
local id = string.match(redis.call("info", "server"), "run_id:(%x+)")
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call("get", KEYS[1])
if v then
	local was, born = string.match(v, "^(%x+) (%d+)$")
	if was == id then
		return {tonumber(born), now}
	end
end
redis.call("set", KEYS[1], id .. " " .. now)
return {now, now}`
