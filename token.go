package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"flashsale/internal/randhex"
	"flashsale/inventory"
)

// tokenSuffix names the file, beside a SQLite database, that keeps the
// generated admin token for the next start: flashsale.db.admin-token.
const tokenSuffix = ".admin-token"

// keptAdminToken is the token /api/admin/* asks for and the line that tells the
// operator where it came from; the line holds the token only when it was
// generated now. A token given (-admin-token) wins. Else, with
// a SQLite file for a database, the token is the one kept beside it from an
// earlier start, or a new one kept there now (mode 0600, only its owner can
// read it): a restart — Lab 15 restarts `go run .` — keeps the token the
// workshop page already holds, where a fresh one would leave the page
// refused and empty. With PostgreSQL or SQLite in memory there is no file
// of ours to keep it beside, and each start generates one.
func keptAdminToken(given, dsn string) (token, line string, err error) {
	if given != "" {
		return given, "", nil
	}
	path, ok := tokenFile(dsn)
	if !ok {
		token = randhex.String(16)
		return token, fmt.Sprintf("admin token (generated; set -admin-token or FLASHSALE_ADMIN_TOKEN to choose one): %s", token), nil
	}
	token, err = readToken(path)
	if err == nil {
		// Not printed again: a terminal projected to the room would show
		// it at every restart. Whoever needs it reads the file.
		return token, fmt.Sprintf("admin token: kept in %s from an earlier start (not printed again: read it there; delete the file for a new one)", path), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	token = randhex.String(16)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another instance on the same database wrote it first: share its.
		return keptAdminToken(given, dsn)
	}
	if err != nil {
		return "", "", fmt.Errorf("keeping the admin token in %s (set -admin-token to choose one instead): %w", path, err)
	}
	_, err = f.WriteString(token + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", fmt.Errorf("keeping the admin token in %s: %w", path, err)
	}
	return token, fmt.Sprintf("admin token (generated, kept in %s for the next start; set -admin-token or FLASHSALE_ADMIN_TOKEN to choose one): %s", path, token), nil
}

// tokenFile is where the token of a SQLite database file is kept; ok is
// false for PostgreSQL, for SQLite in memory and for a DSN with parameters
// of its own (it may not name a plain file).
func tokenFile(dsn string) (path string, ok bool) {
	path, ok = sqliteFile(dsn)
	return path + tokenSuffix, ok
}

// sqliteFile is the plain file a SQLite DSN names; ok is false for
// PostgreSQL, for SQLite in memory and for a DSN with parameters of its own.
func sqliteFile(dsn string) (path string, ok bool) {
	if inventory.IsPostgres(dsn) || strings.Contains(dsn, ":memory:") || strings.Contains(dsn, "?") {
		return "", false
	}
	return strings.TrimPrefix(dsn, "file:"), true
}

// readToken reads a kept token. A file others may read is refused: the
// token opens every admin route.
func readToken(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s holds the admin token but others may read it (mode %v): chmod 600 it, or delete it for a new token", path, info.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, " \t\n") {
		return "", fmt.Errorf("%s holds no admin token (one line expected): delete it for a new one", path)
	}
	return token, nil
}

// privateDatabase creates the SQLite file of dsn, when it names a plain
// file that does not exist yet, readable by its owner only (0600): the
// sale's orders name their shoppers. SQLite gives its journal and WAL
// files the database file's mode. A file that exists is left as it is.
func privateDatabase(dsn string) error {
	path, ok := sqliteFile(dsn)
	if !ok {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the database file %s: %w", path, err)
	}
	return f.Close()
}
