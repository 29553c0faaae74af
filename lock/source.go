package lock

import "embed"

// Source holds the package's files, for the workshop page to show a rung's
// code beside the correct one it differs from (package curriculum pairs
// them). It embeds every file, so a new rung's file is there without a line
// here; the tests come along, a hundred-odd kilobytes that nothing serves.
//
//go:embed *.go
var Source embed.FS
