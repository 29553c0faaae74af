package checker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // the "sqlite3" driver, for OpenSQLite
)

// OpenSQLite opens a sale's SQLite file read-only.
func OpenSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return nil, fmt.Errorf("checker: open %s: %w", path, err)
	}
	return db, nil
}

type row struct {
	id      int64
	sku     string // orders
	seat    string // bookings
	qty     int64
	fence   sql.NullInt64
	key     sql.NullString
	created time.Time
}

type product struct {
	sku            string
	initial, stock int64
}

// dbView is one scope's part of the database.
type dbView struct {
	products               []product
	orders, bookings       []row
	orderKeys, bookingKeys map[string]bool
	oversold, lostUpdates  int64
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func readDB(ctx context.Context, db *sql.DB, sc Scope) (*dbView, error) {
	if db == nil {
		return nil, errors.New("no database given")
	}
	v := &dbView{orderKeys: map[string]bool{}, bookingKeys: map[string]bool{}}
	if len(sc.SKUs) > 0 {
		rows, err := db.QueryContext(ctx, "SELECT sku, initial_stock, stock FROM products WHERE sku IN ("+placeholders(len(sc.SKUs))+") ORDER BY sku", anys(sc.SKUs)...)
		if err != nil {
			return nil, fmt.Errorf("read products: %w", err)
		}
		for rows.Next() {
			var p product
			if err := rows.Scan(&p.sku, &p.initial, &p.stock); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read products: %w", err)
			}
			v.products = append(v.products, p)
		}
		if err := closeRows(rows); err != nil {
			return nil, fmt.Errorf("read products: %w", err)
		}
		v.orders, err = readRows(ctx, db, "SELECT id, sku, qty, fence, idempotency_key, created_at FROM orders WHERE sku IN ("+
			placeholders(len(sc.SKUs))+") ORDER BY id", anys(sc.SKUs), false)
		if err != nil {
			return nil, fmt.Errorf("read orders: %w", err)
		}
	}
	if len(sc.Seats) > 0 {
		var err error
		v.bookings, err = readRows(ctx, db, "SELECT id, seat, 1, fence, idempotency_key, created_at FROM bookings WHERE event_id = ? AND seat IN ("+
			placeholders(len(sc.Seats))+") ORDER BY id", append([]any{sc.Event}, anys(sc.Seats)...), true)
		if err != nil {
			return nil, fmt.Errorf("read bookings: %w", err)
		}
	}
	for _, o := range v.orders {
		if o.key.Valid {
			v.orderKeys[o.key.String] = true
		}
	}
	for _, b := range v.bookings {
		if b.key.Valid {
			v.bookingKeys[b.key.String] = true
		}
	}
	sold := map[string]int64{}
	for _, o := range v.orders {
		sold[o.sku] += o.qty
	}
	for _, p := range v.products {
		v.oversold += max(0, sold[p.sku]-p.initial)
		if d := p.initial - sold[p.sku] - p.stock; d != 0 {
			v.lostUpdates += max(d, -d)
		}
	}
	return v, nil
}

func readRows(ctx context.Context, db *sql.DB, q string, args []any, seats bool) ([]row, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []row
	for rows.Next() {
		var r row
		name := &r.sku
		if seats {
			name = &r.seat
		}
		if err := rows.Scan(&r.id, name, &r.qty, &r.fence, &r.key, &r.created); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	return out, closeRows(rows)
}

func closeRows(rows *sql.Rows) error {
	return errors.Join(rows.Err(), rows.Close())
}

// violations are what the database shows, each placed in time as well as
// the records allow: oversold and stale writes at the order that did it,
// double bookings at the second booking, lost updates at the stock write
// (from the history) that did not go below the one before it.
func (v *dbView) violations(writes []Record) []Violation {
	var out []Violation
	initial := map[string]int64{}
	for _, p := range v.products {
		initial[p.sku] = p.initial
	}
	sold := map[string]int64{}
	fence := map[string]int64{}
	for _, o := range v.orders {
		before := sold[o.sku]
		sold[o.sku] += o.qty
		if init, ok := initial[o.sku]; ok && sold[o.sku] > init && before <= init {
			out = append(out, Violation{Time: o.created, Kind: Oversold, Key: "sku:" + o.sku,
				Detail: fmt.Sprintf("order %d sold unit %d of %s, which started with %d", o.id, sold[o.sku], o.sku, init)})
		}
		if o.fence.Valid {
			if o.fence.Int64 < fence[o.sku] {
				out = append(out, Violation{Time: o.created, Kind: StaleWrite, Key: "sku:" + o.sku,
					Detail: fmt.Sprintf("order %d on %s was committed with fencing token %d after an order with token %d", o.id, o.sku, o.fence.Int64, fence[o.sku])})
			}
			fence[o.sku] = max(fence[o.sku], o.fence.Int64)
		}
	}
	seen := map[string]row{}
	for _, b := range v.bookings {
		if first, ok := seen[b.seat]; ok {
			out = append(out, Violation{Time: b.created, Kind: DoubleBooked, Key: "seat:" + b.seat,
				Detail: fmt.Sprintf("booking %d of seat %s after booking %d", b.id, b.seat, first.id)})
			continue
		}
		seen[b.seat] = b
	}
	if v.lostUpdates > 0 {
		out = append(out, lostUpdateTimes(writes, v.lostUpdates)...)
	}
	return out
}

// lostUpdateTimes finds, in the history's stock writes of each SKU, the
// writes that did not bring the stock below the write before them: there
// a holder wrote over a decrement it never read. If the history shows
// none (a write whose record was lost with its process), the database's
// figure is still reported, without a time.
func lostUpdateTimes(writes []Record, total int64) []Violation {
	var out []Violation
	last := map[string]Record{}
	for _, w := range writes {
		if w.Op != "stock" || w.Stock == nil {
			continue
		}
		if prev, ok := last[w.SKU]; ok && *w.Stock >= *prev.Stock {
			out = append(out, Violation{Time: w.Time, Kind: LostUpdate, Key: "sku:" + w.SKU,
				Detail: fmt.Sprintf("%s wrote stock %d of %s after %s had written %d", short(w.Owner), *w.Stock, w.SKU, short(prev.Owner), *prev.Stock)})
		}
		last[w.SKU] = w
	}
	if len(out) == 0 {
		out = append(out, Violation{Kind: LostUpdate, Detail: fmt.Sprintf("the database's stock is %d units off initial − sold", total)})
	}
	return out
}
