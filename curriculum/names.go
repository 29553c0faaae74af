package curriculum

// The names of the designs the workshop teaches where the store, not a
// Redis lock, keeps the sale right, as the X-Lock-Variant header carries
// them. The lock rungs' names are declared with the rungs (package lock's
// and package ladder's files).
const (
	DBGuard     = "db-guard"
	DBForUpdate = "db-for-update"
	RedisStock  = "redis-stock"
)
