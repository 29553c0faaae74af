package web

import (
	"io/fs"
	"log/slog"
	"strings"

	"flashsale/lock"
)

// variantInfo is what the workshop shows beside a variant: its file in the
// lock package, the correct variant's file it is compared with, one
// paragraph on why it breaks (or why it holds), and the scenario that shows
// it. The paragraphs follow the ladder of docs/design.md; keep them in step with it.
type variantInfo struct {
	name      string
	showsWith string
	why       string
}

// ladder lists the variants in the order of docs/design.md.
var ladder = []variantInfo{
	{
		name: "none", showsWith: "clean",
		why: "No lock at all: every request reads the stock, does its work and writes stock minus quantity. " +
			"Two requests that read the same stock both sell from it, and the later write overwrites the earlier one: " +
			"lost updates and overselling from concurrency alone, with no fault needed, in every scenario.",
	},
	{
		name: "setnx-expire", showsWith: "crash-between-steps",
		why: "SETNX k v and EXPIRE k ttl are two commands. A client that dies between them leaves a lock key with no TTL: " +
			"nobody ever acquires it again, and every later buyer of that SKU waits and gets 503 busy — a deadlock that " +
			"outlives the crashed process (crash-between-steps). Its release is a bare DEL, so a holder paused past its TTL " +
			"also deletes its successor's lock. lua.go creates the key and its TTL in one SET k v NX PX ttl.",
	},
	{
		name: "get-del", showsWith: "pause-between-release-steps",
		why: "The acquire is right (SET k v NX PX ttl), but the release checks and deletes in two commands: GET k, compare " +
			"with our value, then DEL k. A holder that stalls between them for longer than the TTL finds its lock expired " +
			"and taken by another client, and its DEL removes the new holder's lock; a third client walks in beside the " +
			"second. Two holders sell the same stock (pause-between-release-steps). lua.go runs the compare and the delete " +
			"as one Lua script, which nothing can interrupt.",
	},
	{
		name: "plain-del", showsWith: "pause-in-critical-section",
		why: "Releases with a bare DEL k and never checks that the lock is still its own. A holder whose critical section " +
			"outlives its TTL comes back and deletes the lock its successor now holds, letting a third client in beside the " +
			"second: two holders at once, overselling (pause-in-critical-section). lua.go deletes the key only while it " +
			"still carries the holder's own random value.",
	},
	{
		name: "lua", showsWith: "pause-in-critical-section",
		why: "The correct single-node lock: SET k <random> NX PX ttl, released and extended by Lua scripts that compare the " +
			"owner value and act in one atomic step, so no other client's lock is ever deleted. It still breaks when a " +
			"holder pauses inside its critical section past the TTL (a GC pause, swap, SIGSTOP): the lease expires, a " +
			"successor acquires, and the paused holder wakes believing it still holds the lock and writes stale stock. No " +
			"lock alone can prevent that; the store must refuse the stale write (lua+fence). And one Redis node is one point " +
			"of failure: restarted without its data, it forgets the lock (node-restart).",
	},
	{
		name: "redlock", showsWith: "pause-in-critical-section",
		why: "SET NX PX on N independent masters in parallel, each under a short timeout; the lock is held when a quorum " +
			"(N/2+1) granted it and time is left (validity = ttl − elapsed − drift), so a minority of nodes can be down. " +
			"A node restarted without its data inside a lease held by a bare quorum has forgotten the grant and can vote " +
			"for a second client — two holders — unless the client is restart-aware: a node whose own uptime is below " +
			"TTL + drift does not vote, whichever client asks. Like lua, it cannot stop a holder paused past its TTL from writing stale stock: that needs fencing.",
	},
	{
		name: "lua+check", showsWith: "pause-after-lease-check",
		why: "lua whose holder checks its lease just before it writes, as many implementations advise: is there validity " +
			"left, and does GET k still return our value? A holder paused inside its work past the TTL wakes, checks, finds " +
			"the lease gone and writes nothing (409 lease_lost), so pause-in-critical-section holds. But the check and the " +
			"write are two steps: a pause between them (pause-after-lease-check) lets a holder check \"still mine\", stall " +
			"past the TTL and write beside its successor. The check narrows the window; only the store's fencing-token " +
			"check closes it. Under long-work it sells nothing at all: every lease has run out by the check; that needs the watchdog.",
	},
	{
		name: "lua+fence", showsWith: "pause-in-critical-section",
		why: "lua with fencing tokens: the same Lua step that sets the lock draws a token from a counter on the node, and the " +
			"store raises the row's fence to that token before reading and writes only while the row still carries it. A " +
			"holder paused past its TTL can still overlap its successor on the timeline, but its write carries an older " +
			"token and is refused (409 stale_fence): the pause no longer oversells. If the node restarts without its " +
			"counter, the new tokens are lower and the store refuses them too: sales stop (unavailable), never unsafe.",
	},
	{
		name: "redlock+fence", showsWith: "pause-in-critical-section",
		why: "Redlock with fencing tokens. Each node draws a token from its own counter with its SET; the lease takes the " +
			"largest of its quorum and writes it back as max(counter, token) to a majority of the nodes that still hold the " +
			"lease, so any later quorum meets a counter past it and tokens only grow from holder to holder. A restarted node " +
			"is re-seeded from a majority before it counts again. The store checks the token around its read-modify-write, " +
			"so neither a paused holder nor a restarted node can oversell.",
	},
	{
		name: "db-guard", showsWith: "pause-in-critical-section",
		why: "No Redis lock at all: one conditional statement in the order's transaction, UPDATE products SET stock = stock − q " +
			"WHERE sku = ? AND stock >= q (a seat: UPDATE seats SET booked = TRUE WHERE … AND booked = FALSE). The database applies " +
			"it atomically, so the last unit is sold once whoever pauses where: a refused statement is a 409, never an oversell, " +
			"in every scenario. What it does not do is keep the business work (a payment call) from running for two buyers of " +
			"the last unit: both work, then one of them finds the stock gone. A lock still buys that.",
	},
	{
		name: "db-for-update", showsWith: "pause-in-critical-section",
		why: "The database's own lock: SELECT … FOR UPDATE locks the product's row inside the transaction, which then checks, " +
			"works and writes stock read − q. Nobody else can read that row until the commit, so the read-modify-write is safe " +
			"without Redis. On SQLite there are no row locks: the immediate transaction takes the database's one write lock, " +
			"so every writer waits, not just the SKU's buyers. The cost is the lock held for the whole business work: a pause " +
			"in the critical section stalls every buyer of the SKU (on SQLite, every buyer), slow but never oversold.",
	},
	{
		name: "redis-stock", showsWith: "node-restart",
		why: "The flash-sale guides' design: the stock lives in Redis, and a Lua script checks and DECRBYs it in one step, so " +
			"no unit is reserved twice; then the order is written to the database, and a failed write gives the units back " +
			"(INCRBY). No lock, and the database is touched only by buyers who got a unit. Redis is the guard, so Redis's " +
			"state is the sale's: a node restarted without its data has lost the stock, and sales answer 503 until a reset " +
			"re-seeds it (re-seeding from the database mid-sale would sell the units still in flight twice). The audit's " +
			"redis_stock_drift says when Redis and the database differ.",
	},
	{
		name: "attendee", showsWith: "clean",
		why: "Your rung (docs/workshop.md, Lab 15), shipped with two flaws. Its acquire reads SET NX's redis.Nil the way GET's " +
			"is read, as \"no such key\"; for SET NX it means nothing was set because someone holds the lock, so as shipped " +
			"everyone gets in and it breaks like no lock at all (clean). Its release then checks with GET and deletes with " +
			"DEL, get-del's flaw (pause-between-release-steps). Fix both in lock/attendee.go, restart the server, and run it " +
			"here; lua.go, beside it, is where it should end up.",
	},
}

// variantNames lists the ladder's names in order.
func variantNames() []string {
	out := make([]string, len(ladder))
	for i, v := range ladder {
		out[i] = v.name
	}
	return out
}

// prose is the workshop's paragraph and scenario for a rung.
func prose(name string) (variantInfo, bool) {
	for _, v := range ladder {
		if v.name == name {
			return v, true
		}
	}
	return variantInfo{}, false
}

// sourceView is the answer of GET /workshop/source/{variant}. Line numbers
// count from 1. Differs are the lines of Source that the reference does not
// have (under a longest-common-subsequence line diff); ReferenceDiffers the
// lines of ReferenceSource that Source does not have. For a correct variant
// the file is its own reference and both lists are empty.
type sourceView struct {
	Variant          string `json:"variant"`
	File             string `json:"file"`
	Reference        string `json:"reference"`
	Source           string `json:"source"`
	Differs          []int  `json:"differs"`
	ReferenceSource  string `json:"reference_source"`
	ReferenceDiffers []int  `json:"reference_differs"`
	Why              string `json:"why"`
	ShowsWith        string `json:"shows_with"`
}

// loadSources reads the variant files and diffs each against its reference
// once, at start-up: the files are embedded, so the answers never change.
func loadSources(src sourceFS, log *slog.Logger) map[string]sourceView {
	out := map[string]sourceView{}
	if src.lock == nil && src.store == nil {
		log.Warn("web: no lock variant sources given; the workshop will not show code")
		return out
	}
	for _, r := range lock.Ladder() {
		v, ok := prose(r.Name)
		if !ok {
			log.Warn("web: no workshop paragraph for a lock variant", "variant", r.Name)
			continue
		}
		text, err := fs.ReadFile(src, r.File)
		if err != nil {
			log.Warn("web: lock variant source missing", "variant", r.Name, "file", r.File, "err", err)
			continue
		}
		ref, err := fs.ReadFile(src, r.Reference)
		if err != nil {
			log.Warn("web: lock reference source missing", "variant", r.Name, "file", r.Reference, "err", err)
			continue
		}
		onlyA, onlyB := diffLines(splitLines(string(text)), splitLines(string(ref)))
		out[r.Name] = sourceView{
			Variant: r.Name, File: r.File, Reference: r.Reference,
			Source: string(text), Differs: onlyA,
			ReferenceSource: string(ref), ReferenceDiffers: onlyB,
			Why: v.why, ShowsWith: v.showsWith,
		}
	}
	return out
}

// sourceFS is where a rung's files are: the lock package's at the root,
// the inventory's (the store-guarded rungs) under "inventory/".
type sourceFS struct{ lock, store fs.FS }

// Open opens a file of either package; a package not given has no files.
func (s sourceFS) Open(name string) (fs.File, error) {
	src := s.lock
	if rest, ok := strings.CutPrefix(name, "inventory/"); ok {
		src, name = s.store, rest
	}
	if src == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return src.Open(name)
}

// splitLines splits a file into lines without their line endings; a final
// newline does not start another line.
func splitLines(s string) []string {
	s = strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// diffLines is a longest-common-subsequence line diff: it returns the
// 1-based numbers of the lines of a not in the common subsequence, and those
// of b. Lines compare without trailing blanks. The files are a few hundred
// lines, so the quadratic table is small.
func diffLines(a, b []string) (onlyA, onlyB []int) {
	onlyA, onlyB = []int{}, []int{}
	n, m := len(a), len(b)
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	same := func(i, j int) bool {
		return strings.TrimRight(a[i], " \t") == strings.TrimRight(b[j], " \t")
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if same(i, j) {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case same(i, j):
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			onlyA = append(onlyA, i+1)
			i++
		default:
			onlyB = append(onlyB, j+1)
			j++
		}
	}
	for ; i < n; i++ {
		onlyA = append(onlyA, i+1)
	}
	for ; j < m; j++ {
		onlyB = append(onlyB, j+1)
	}
	return onlyA, onlyB
}
