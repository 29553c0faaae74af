package randhex

import (
	"encoding/hex"
	"testing"
)

func TestString(t *testing.T) {
	for _, n := range []int{4, 8, 16} {
		s := String(n)
		if len(s) != 2*n {
			t.Fatalf("String(%d) = %q: %d characters, want %d", n, s, len(s), 2*n)
		}
		if _, err := hex.DecodeString(s); err != nil {
			t.Fatalf("String(%d) = %q: not hex: %v", n, s, err)
		}
		if s == String(n) {
			t.Fatalf("String(%d) gave %q twice", n, s)
		}
	}
}
