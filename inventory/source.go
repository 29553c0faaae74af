package inventory

import "embed"

// Source holds the files of the store-guarded variants (db-guard,
// db-for-update, redis-stock), for the workshop page to show the code that
// takes the place of a lock. Their rungs name them "inventory/<file>".
//
//go:embed db_guard.go for_update.go redis_stock.go
var Source embed.FS
