package inventory

import (
	"flashsale/curriculum"
	"flashsale/lock"
)

// guard is what keeps a rung's sale correct: the Redis lock, or a guard on
// the store side that the sale applies in place of any lock. The
// store-guarded rungs take no Redis lock at all (ladder.Rung.StoreGuarded);
// the sale picks its write path from the guard, never from a name
// elsewhere.
type guard int

const (
	// guardLock: the Redis lock (and, for a fenced rung, the store's token
	// check) is the guard; the store writes what the holder read.
	guardLock guard = iota
	// guardConditional: one conditional write in the order's transaction
	// (UPDATE … SET stock = stock − q WHERE … AND stock >= q; a seat row
	// marked booked only where it is not yet).
	guardConditional
	// guardRowLock: the row is locked in the transaction (SELECT … FOR
	// UPDATE on PostgreSQL; on SQLite the immediate transaction is the
	// lock) while the sale reads, checks, works and writes.
	guardRowLock
	// guardRedisStock: the stock lives in Redis and is reserved there by a
	// Lua check-and-DECRBY (a seat by SET NX) before the database write;
	// a failed write gives it back.
	guardRedisStock
)

// storeGuards are the store-guarded rungs' guards, by rung name.
var storeGuards = map[string]guard{
	curriculum.DBGuard:     guardConditional,
	curriculum.DBForUpdate: guardRowLock,
	curriculum.RedisStock:  guardRedisStock,
}

// guardOf is the guard of locker's rung.
func guardOf(locker *lock.Locker) guard { return storeGuards[locker.Name()] }
