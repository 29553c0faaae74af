package inventory

import "embed"

// Source holds the files of the store's designs (Designs), for the workshop
// page to show the code that takes the place of a lock. A Design names its
// file "inventory/<file>".
//
//go:embed db_guard.go for_update.go redis_stock.go
var Source embed.FS
