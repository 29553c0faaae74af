package inventory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"
)

// A database that cannot be reached is neither the shopper's mistake nor a
// bug here: the answer is "try again shortly", not a 500. Such errors are
// marked where they arise, in the database layer and nowhere else (a Redis
// node that refuses a connection is the lock's business, not the store's):
// every statement by a callback Open registers (watchStore), and the
// begin and commit of a transaction, which run outside those callbacks, by
// storeUnavailable at each transaction.

// storeDown reports whether err says the database could not be reached: a
// connection that could not be made (refused, timed out, the server not
// accepting yet), one that broke under a statement (reset, closed, cut
// short), a PostgreSQL server shutting down, a SQLite file that can no
// longer be opened or read, or a pool closed by this process's shutdown.
func storeDown(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false // the caller gave up, whatever the database was doing
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		return pgUnavailable(state.SQLState())
	}
	var lite sqlite3.Error
	if errors.As(err, &lite) {
		return lite.Code == sqlite3.ErrCantOpen || lite.Code == sqlite3.ErrIoErr
	}
	for _, target := range []error{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		io.ErrUnexpectedEOF, pgconn.ErrConnClosed, driver.ErrBadConn, sql.ErrConnDone,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	// database/sql's error for a closed pool is not exported.
	return strings.Contains(err.Error(), "sql: database is closed")
}

// pgUnavailable reports whether a PostgreSQL SQLSTATE means the server
// cannot serve: class 08 (connection exception), or 57P01–57P03 (shutting
// down by an administrator, after a crash, or not accepting connections
// yet).
func pgUnavailable(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"):
		return true
	case code == "57P01", code == "57P02", code == "57P03":
		return true
	}
	return false
}

// storeUnavailable wraps err in ErrStoreUnavailable when it says the
// database could not be reached, and returns it unchanged otherwise.
func storeUnavailable(err error) error {
	if err != nil && !errors.Is(err, ErrStoreUnavailable) && storeDown(err) {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return err
}

// watchStore registers, after every statement db runs, the callback that
// marks an unreachable database's error with ErrStoreUnavailable.
func watchStore(db *gorm.DB) error {
	const name = "inventory:store_unavailable"
	mark := func(tx *gorm.DB) { tx.Error = storeUnavailable(tx.Error) }
	cb := db.Callback()
	return errors.Join(
		cb.Create().After("*").Register(name, mark),
		cb.Query().After("*").Register(name, mark),
		cb.Update().After("*").Register(name, mark),
		cb.Delete().After("*").Register(name, mark),
		cb.Row().After("*").Register(name, mark),
		cb.Raw().After("*").Register(name, mark),
	)
}
