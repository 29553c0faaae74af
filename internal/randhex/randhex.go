// Package randhex makes random hex strings: lock owner values, process ids,
// tokens and test namespaces that nobody else may produce by accident.
package randhex

import (
	"crypto/rand"
	"encoding/hex"
)

// String is n bytes from crypto/rand, hex-encoded (2n characters).
func String(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
