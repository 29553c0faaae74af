package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// IsPostgres reports whether dsn names a PostgreSQL database rather than a
// SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// sqliteDSN turns a file name into a mattn/go-sqlite3 DSN. WAL lets readers
// run beside the writer; the busy timeout makes a second process's writer
// wait instead of failing with "database is locked"; _txlock=immediate takes
// the write lock at BEGIN, so two transactions never both read and then
// deadlock on upgrading to write (which no busy timeout can resolve). A DSN
// that already carries parameters is used as given.
func sqliteDSN(dsn string) string {
	if strings.Contains(dsn, "?") {
		return dsn
	}
	return sqliteFile(dsn, "_journal_mode=WAL&_busy_timeout=10000&_txlock=immediate")
}

// sqliteFile is the DSN of the SQLite file name with the parameters params.
func sqliteFile(name, params string) string {
	if !strings.HasPrefix(name, "file:") {
		name = "file:" + name
	}
	return name + "?" + params
}

// Open connects to the database named by dsn: PostgreSQL for a postgres://
// URL, else a SQLite file (created if missing). It does not migrate; New does.
// An error that says the database cannot be reached, from Open or from any
// statement later run on the returned DB, wraps ErrStoreUnavailable.
func Open(ctx context.Context, dsn string, log *slog.Logger) (*gorm.DB, error) {
	if IsPostgres(dsn) {
		// Several replicas share one server (PostgreSQL allows 100
		// connections by default): a sale holds a connection only for its
		// short transaction, so a small pool per replica is plenty.
		return open(ctx, postgres.Open(dsn), dsn, 12, log)
	}
	// One connection: this process's writers queue in Go instead of
	// competing for SQLite's single write lock.
	return open(ctx, sqlite.Open(sqliteDSN(dsn)), dsn, 1, log)
}

// OpenReads connects to the same database for the reads a sale makes before
// its lock (Config.Reads): the product it sheds load with, the order an
// Idempotency-Key names. They must not queue where the lock holder's
// transaction does. On SQLite that is the one connection Open keeps: under
// a spike, a hundred sales just admitted would each read on it, and the
// holder's transaction would wait its turn among them (database/sql hands a
// freed connection to a waiter picked at random), holding the lock the whole
// time. WAL lets these readers run beside the writer. On PostgreSQL it is a
// small pool of its own. A SQLite database in memory has no second
// connection to the same data, and a DSN given with its own parameters is
// used by Open as it is: OpenReads then returns nil, and the sale reads on
// the main handle.
func OpenReads(ctx context.Context, dsn string, log *slog.Logger) (*gorm.DB, error) {
	if IsPostgres(dsn) {
		return open(ctx, postgres.Open(dsn), dsn, 4, log)
	}
	if strings.Contains(dsn, ":memory:") || strings.Contains(dsn, "?") { // mode=memory comes with a "?"
		return nil, nil
	}
	return open(ctx, sqlite.Open(sqliteReadsDSN(dsn)), dsn, 4, log)
}

// sqliteReadsDSN is sqliteDSN for a connection that only reads: it never
// takes the write lock, so it needs no _txlock, and it leaves the journal
// mode to the writer.
func sqliteReadsDSN(dsn string) string {
	return sqliteFile(dsn, "_busy_timeout=10000&_query_only=true")
}

// open connects through dial with a pool of at most conns connections.
func open(ctx context.Context, dial gorm.Dialector, dsn string, conns int, log *slog.Logger) (*gorm.DB, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg := &gorm.Config{
		// Every write the sale makes is in an explicit transaction already;
		// gorm's implicit ones would only add round trips.
		SkipDefaultTransaction: true,
		// Unique violations come back as gorm.ErrDuplicatedKey on both drivers.
		TranslateError: true,
		Logger: logger.New(slog.NewLogLogger(log.Handler(), slog.LevelWarn), logger.Config{
			SlowThreshold:             2 * time.Second,
			LogLevel:                  logger.Warn,
			IgnoreRecordNotFoundError: true,
		}),
	}
	db, err := gorm.Open(dial, cfg)
	if err != nil {
		return nil, fmt.Errorf("inventory: open %s: %w", RedactDSN(dsn), storeUnavailable(err))
	}
	if err := watchStore(db); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	// Every connection stays open once made: a connection closed when a
	// burst ends is opened again at the next one, and on PostgreSQL each
	// opening pays for its authentication inside some shopper's budget.
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("inventory: ping %s: %w", RedactDSN(dsn), storeUnavailable(err))
	}
	warm(ctx, sqlDB, conns)
	return db, nil
}

// warm opens the pool's connections before the first sale needs them. A
// flash sale begins with a burst: on a cold pool every replica opens all
// its connections at that moment, PostgreSQL authenticates each one (SCRAM
// is slow by design), and in the compose stack the first orders' reads ran
// out of their 1 s budget waiting for it. A connection that cannot be
// opened now is simply opened later, as before.
func warm(ctx context.Context, db *sql.DB, n int) {
	held := make([]*sql.Conn, 0, n)
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	for _, c := range held {
		_ = c.Close() // back to the pool, which keeps it
	}
}

// Close closes the database's connections.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// passwordParam is a password given as a parameter: in a URL's query
// (?password=…) or in a key=value DSN (password=… or password='…').
var passwordParam = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)`)

// RedactDSN hides the passwords in a database DSN before it reaches a log,
// an error or a flag's default: the password of a URL's user info (which
// may hold an '@' itself: the host follows the last one) and every
// password parameter.
func RedactDSN(dsn string) string {
	out := dsn
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok {
		// Not cut at the first '/': a password may hold one unescaped.
		end := strings.IndexAny(rest, "?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
				out = scheme + "://" + user + ":xxxxx" + rest[at:]
			}
		}
	}
	return passwordParam.ReplaceAllString(out, "${1}xxxxx")
}

// seatOnceIndex is the production-mode guard against double booking.
const seatOnceIndex = "idx_bookings_seat_once"

// globalKeyIndexes made an Idempotency-Key unique across all users, so a
// stranger's 422 told whether a key was in use. Keys are unique per user
// now (idx_orders_user_key, idx_bookings_user_key); a database from before
// loses these on start-up.
var globalKeyIndexes = []string{"idx_orders_idempotency_key", "idx_bookings_idempotency_key"}

// migrate creates or updates the tables. Several instances may start at once
// on one database: PostgreSQL serialises them with an advisory lock; SQLite
// retries, since the loser of a CREATE TABLE race finds the table on the next
// pass.
func migrate(ctx context.Context, db *gorm.DB, production bool) error {
	run := func(tx *gorm.DB) error {
		if err := tx.AutoMigrate(&Product{}, &Event{}, &Seat{}, &Order{}, &Booking{}); err != nil {
			return err
		}
		for _, idx := range globalKeyIndexes {
			if err := tx.Exec("DROP INDEX IF EXISTS " + idx).Error; err != nil {
				return fmt.Errorf("drop the old index %s: %w", idx, err)
			}
		}
		if production {
			// Defence in depth: the database refuses a second booking even if
			// the lock let two holders in.
			if err := tx.Exec("CREATE UNIQUE INDEX IF NOT EXISTS " + seatOnceIndex + " ON bookings (event_id, seat)").Error; err != nil {
				return fmt.Errorf("production mode needs a unique index on bookings(event_id, seat), and the existing bookings have duplicates (reset the sale first): %w", err)
			}
			return nil
		}
		// Workshop mode: no database guard may hide a lock failure.
		return tx.Exec("DROP INDEX IF EXISTS " + seatOnceIndex).Error
	}
	db = db.WithContext(ctx)
	if db.Dialector.Name() == "postgres" {
		return db.Connection(func(conn *gorm.DB) error {
			const key = 0x666c617368 // "flash": one migration at a time
			if err := conn.Exec("SELECT pg_advisory_lock(?)", key).Error; err != nil {
				return err
			}
			defer conn.Exec("SELECT pg_advisory_unlock(?)", key)
			return run(conn)
		})
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = run(db); err == nil || errors.Is(err, context.Canceled) {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
	return err
}
