package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A generated token is kept beside the SQLite file, readable by its owner
// only, and the next start serves with it, saying where it is without
// printing it again; a token given, PostgreSQL and
// SQLite in memory keep nothing; a kept file others may read, or an empty
// one, is refused with what to do.
func TestAdminTokenKeptAcrossStarts(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "sale.db")
	kept := db + tokenSuffix

	first, said, err := keptAdminToken("", db)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 32 || !strings.Contains(said, kept) || !strings.HasSuffix(said, first) {
		t.Fatalf("first start: token %q, said %q", first, said)
	}
	info, err := os.Stat(kept)
	if err != nil {
		t.Fatalf("the token is not kept: %v", err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("kept with mode %v, want 0600", perm)
	}
	for _, dsn := range []string{db, "file:" + db} {
		again, said, err := keptAdminToken("", dsn)
		if err != nil || again != first || !strings.Contains(said, "earlier start") || strings.Contains(said, first) {
			t.Errorf("restart on %q: token %q (want %q), said %q, err %v", dsn, again, first, said, err)
		}
	}
	if tok, said, err := keptAdminToken("chosen", db); tok != "chosen" || said != "" || err != nil {
		t.Errorf("a token given: %q, %q, %v", tok, said, err)
	}

	for _, dsn := range []string{"postgres://127.0.0.1:5432/test", "file::memory:?cache=shared", ":memory:"} {
		a, _, errA := keptAdminToken("", dsn)
		b, _, errB := keptAdminToken("", dsn)
		if errA != nil || errB != nil || a == b || len(a) != 32 {
			t.Errorf("%s: two starts gave %q and %q (%v, %v); want two fresh tokens", dsn, a, b, errA, errB)
		}
	}

	refused := []struct {
		name, content string
		mode          os.FileMode
		says          string
	}{
		{"others may read it", "abc\n", 0o644, "chmod 600"},
		{"empty", "\n", 0o600, "delete it"},
		{"two words", "a b\n", 0o600, "delete it"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "x.db")
			if err := os.WriteFile(db+tokenSuffix, []byte(c.content), c.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(db+tokenSuffix, c.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			tok, _, err := keptAdminToken("", db)
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("token %q, err %v; want an error saying %q", tok, err, c.says)
			}
		})
	}
}
