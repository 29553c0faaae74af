package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"
)

// Which driver errors say "the database cannot be reached", in the shapes
// the drivers return them (wrapped as the sale wraps them). The end-to-end
// tests cut a real link; these cover the answers a cut cannot produce on
// demand: a server shutting down, a file that cannot be opened.
func TestStoreDownKinds(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		name string
		err  error
		down bool
	}{
		{"connection refused", fmt.Errorf("read product: %w", refused), true},
		{"connection reset", fmt.Errorf("write stock: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{"cut short", fmt.Errorf("write stock: %w", io.ErrUnexpectedEOF), true},
		{"pgx conn closed", fmt.Errorf("insert order: %w", pgconn.ErrConnClosed), true},
		{"pool closed", errors.New("sql: database is closed"), true},
		{"conn done", sql.ErrConnDone, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"sqlite cannot open", sqlite3.Error{Code: sqlite3.ErrCantOpen}, true},
		{"sqlite I/O", sqlite3.Error{Code: sqlite3.ErrIoErr}, true},
		{"request gone", fmt.Errorf("read product: %w: %w", context.Canceled, refused), false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"lock timeout", &pgconn.PgError{Code: "55P03"}, false},
		{"syntax", &pgconn.PgError{Code: "42601"}, false},
		{"sqlite busy", sqlite3.Error{Code: sqlite3.ErrBusy}, false},
		{"sqlite constraint", sqlite3.Error{Code: sqlite3.ErrConstraint}, false},
		{"not found", gorm.ErrRecordNotFound, false},
		{"duplicate", gorm.ErrDuplicatedKey, false},
		{"sold out", ErrSoldOut, false},
		{"deadline on a query", fmt.Errorf("read product: %w", context.DeadlineExceeded), false},
	}
	for _, c := range cases {
		if got := storeDown(c.err); got != c.down {
			t.Errorf("%s (%v): storeDown %v, want %v", c.name, c.err, got, c.down)
		}
		if got := errors.Is(storeUnavailable(c.err), ErrStoreUnavailable); got != c.down {
			t.Errorf("%s: wrapped in ErrStoreUnavailable %v, want %v", c.name, got, c.down)
		}
	}
}
