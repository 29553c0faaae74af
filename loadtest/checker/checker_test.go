package checker

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ptr[T any](v T) *T { return &v }

// acquired is a lease record: granted at ms, believed until ms+valid.
func acquired(owner, variant, key string, ms, valid int, token uint64, fenced bool) Record {
	return Record{Time: at(ms), Kind: "lease", Op: "acquired", Proc: "pid:1", Variant: variant, Key: key, Owner: owner,
		Token: token, Fenced: fenced, Acquired: ptr(at(ms)), ValidUntil: ptr(at(ms + valid))}
}

func released(owner string, ms int) Record {
	return Record{Time: at(ms), Kind: "lease", Op: "released", Owner: owner}
}

func write(owner, sku string, ms int, stock int64) Record {
	return Record{Time: at(ms), Kind: "write", Op: "stock", Owner: owner, SKU: sku, Stock: ptr(stock)}
}

func ack(variant, key string, ms int) Record {
	return Record{Time: at(ms), Kind: "ack", Op: "order", Variant: variant, Status: 201, IdempotencyKey: key}
}

type order struct {
	sku   string
	fence *int64
	key   string
	ms    int
}

type sale struct {
	initial, stock int64
	orders         []order
	bookings       []string // seat labels, in commit order
}

// saleDB makes a SQLite file with the columns the checker reads, and
// nothing from the app's own schema code.
func saleDB(t *testing.T, s sale) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sale.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE products (sku TEXT PRIMARY KEY, initial_stock INTEGER, stock INTEGER, fence INTEGER)`)
	exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, sku TEXT, qty INTEGER, fence INTEGER, idempotency_key TEXT, created_at datetime)`)
	exec(`CREATE TABLE bookings (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT, seat TEXT, fence INTEGER, idempotency_key TEXT, created_at datetime)`)
	exec(`INSERT INTO products VALUES ('hot', ?, ?, 0)`, s.initial, s.stock)
	for _, o := range s.orders {
		exec(`INSERT INTO orders (sku, qty, fence, idempotency_key, created_at) VALUES (?, 1, ?, ?, ?)`, o.sku, o.fence, o.key, at(o.ms))
	}
	for i, seat := range s.bookings {
		exec(`INSERT INTO bookings (event_id, seat, idempotency_key, created_at) VALUES ('gala', ?, ?, ?)`, seat, "b"+seat+string(rune('0'+i)), at(100*i))
	}
	return db
}

func TestCheck(t *testing.T) {
	two := sale{initial: 10, stock: 8, orders: []order{{sku: "hot", key: "k1", ms: 20}, {sku: "hot", key: "k2", ms: 220}}}
	seq := []Record{
		acquired("aaaa", "lua", "sku:hot", 0, 500, 0, false), write("aaaa", "hot", 20, 9), released("aaaa", 30),
		acquired("bbbb", "lua", "sku:hot", 200, 500, 0, false), write("bbbb", "hot", 220, 8), released("bbbb", 230),
		ack("lua", "k1", 25), ack("lua", "k2", 225),
	}
	jump := Record{Time: at(150), Kind: "nemesis", Op: "instant", Fault: "clock-jump", Target: "node 0"}
	cases := []struct {
		name    string
		variant string
		guarded bool // the variant's store guards its sale (Scope.StoreGuarded)
		recs    []Record
		sale    sale
		stuck   []string
		want    Result // the counters and the verdict
		kind    string // the first violation's kind, if any
		nemesis string // a nemesis event the first violation must name
	}{
		{name: "one holder after another holds", variant: "lua", recs: seq, sale: two, want: Result{Verdict: Holds}},
		{
			name: "a lease granted while another is believed is an overlap", variant: "lua",
			recs: []Record{
				jump,
				acquired("aaaa", "lua", "sku:hot", 0, 500, 0, false), write("aaaa", "hot", 300, 9), released("aaaa", 310),
				acquired("bbbb", "lua", "sku:hot", 200, 500, 0, false), write("bbbb", "hot", 220, 9), released("bbbb", 230),
			},
			sale: sale{initial: 10, stock: 9, orders: []order{{sku: "hot", key: "k1", ms: 220}, {sku: "hot", key: "k2", ms: 300}}},
			want: Result{Verdict: Breaks, Counts: Counts{LockOverlaps: 1, LostUpdates: 1}}, kind: LockOverlap, nemesis: "clock-jump node 0",
		},
		{
			name: "other variants' leases on the key are not this variant's", variant: "redlock",
			recs: []Record{
				acquired("aaaa", "lua", "sku:hot", 0, 500, 0, false),
				acquired("bbbb", "lua", "sku:hot", 200, 500, 0, false),
			},
			sale: sale{initial: 10, stock: 10}, want: Result{Verdict: Holds},
		},
		{
			name: "a fenced lease ends where a higher token begins", variant: "lua+fence",
			recs: []Record{
				acquired("aaaa", "lua+fence", "sku:hot", 0, 500, 1, true),
				acquired("bbbb", "lua+fence", "sku:hot", 200, 500, 2, true), released("bbbb", 230),
			},
			sale: sale{initial: 10, stock: 10}, want: Result{Verdict: Holds},
		},
		{
			name: "a fenced lease granted with a lower token is superseded, not an overlap", variant: "lua+fence",
			recs: []Record{
				acquired("aaaa", "lua+fence", "sku:hot", 0, 500, 2, true),
				acquired("bbbb", "lua+fence", "sku:hot", 200, 500, 1, true),
			},
			sale: sale{initial: 10, stock: 10}, want: Result{Verdict: Holds, Counts: Counts{TokenInversions: 1}},
		},
		{
			name: "a fenced lease back from its acquire after a higher token was granted is no holder", variant: "redlock+fence",
			recs: []Record{
				acquired("aaaa", "redlock+fence", "sku:hot", 0, 500, 1401, true),
				acquired("bbbb", "redlock+fence", "sku:hot", 5, 300, 1378, true), released("bbbb", 6),
			},
			sale: sale{initial: 10, stock: 10}, want: Result{Verdict: Holds, Counts: Counts{TokenInversions: 1}},
		},
		{
			name: "a fenced lease granted after a higher token was released is an inversion, not an overlap", variant: "redlock+fence",
			recs: []Record{
				acquired("aaaa", "redlock+fence", "sku:hot", 0, 500, 9, true), released("aaaa", 100),
				acquired("bbbb", "redlock+fence", "sku:hot", 200, 500, 8, true), released("bbbb", 300),
				acquired("cccc", "redlock+fence", "sku:hot", 400, 500, 10, true), released("cccc", 450),
			},
			sale: sale{initial: 10, stock: 10}, want: Result{Verdict: Holds, Counts: Counts{TokenInversions: 1}},
		},
		{
			name: "two fenced leases with one token overlap", variant: "redlock+fence",
			recs: []Record{
				acquired("aaaa", "redlock+fence", "sku:hot", 0, 500, 7, true),
				acquired("bbbb", "redlock+fence", "sku:hot", 200, 500, 7, true),
			},
			sale: sale{initial: 10, stock: 10}, want: Result{Verdict: Breaks, Counts: Counts{LockOverlaps: 1}}, kind: LockOverlap,
		},
		{
			name: "a lease whose reply came after its validity overlaps nothing", variant: "lua",
			recs: []Record{
				acquired("aaaa", "lua", "sku:hot", 0, 500, 0, false),
				{Time: at(700), Kind: "lease", Op: "acquired", Variant: "lua", Key: "sku:hot", Owner: "late",
					Acquired: ptr(at(700)), ValidUntil: ptr(at(600))},
			},
			sale: sale{initial: 10, stock: 10}, want: Result{Verdict: Holds},
		},
		{
			name: "a store-guarded variant's leases guard nothing: two at once are no overlap", variant: "db-guard", guarded: true,
			recs: []Record{
				acquired("aaaa", "db-guard", "sku:hot", 0, 500, 0, false), write("aaaa", "hot", 300, 9), released("aaaa", 310),
				acquired("bbbb", "db-guard", "sku:hot", 200, 500, 0, false), write("bbbb", "hot", 220, 8), released("bbbb", 230),
			},
			sale: sale{initial: 10, stock: 8, orders: []order{{sku: "hot", key: "k1", ms: 220}, {sku: "hot", key: "k2", ms: 300}}},
			want: Result{Verdict: Holds},
		},
		{
			name: "a store-guarded variant is judged by its data", variant: "db-guard", guarded: true,
			recs: []Record{
				acquired("aaaa", "db-guard", "sku:hot", 0, 500, 0, false), write("aaaa", "hot", 300, 9), released("aaaa", 310),
				acquired("bbbb", "db-guard", "sku:hot", 200, 500, 0, false), write("bbbb", "hot", 220, 9), released("bbbb", 230),
			},
			sale: sale{initial: 10, stock: 9, orders: []order{{sku: "hot", key: "k1", ms: 220}, {sku: "hot", key: "k2", ms: 300}}},
			want: Result{Verdict: Breaks, Counts: Counts{LostUpdates: 1}}, kind: LostUpdate,
		},
		{
			name: "a write over a decrement it never read is a lost update", variant: "lua",
			recs: []Record{
				acquired("aaaa", "lua", "sku:hot", 0, 100, 0, false), write("aaaa", "hot", 400, 9),
				acquired("bbbb", "lua", "sku:hot", 200, 100, 0, false), write("bbbb", "hot", 220, 9),
			},
			sale: sale{initial: 10, stock: 9, orders: []order{{sku: "hot", key: "k1", ms: 220}, {sku: "hot", key: "k2", ms: 400}}},
			want: Result{Verdict: Breaks, Counts: Counts{LostUpdates: 1}}, kind: LostUpdate,
		},
		{
			name: "more sold than there was is oversold", variant: "lua",
			sale: sale{initial: 1, stock: -1, orders: []order{{sku: "hot", key: "k1", ms: 10}, {sku: "hot", key: "k2", ms: 20}}},
			want: Result{Verdict: Breaks, Counts: Counts{OversoldUnits: 1}}, kind: Oversold,
		},
		{
			name: "an older token committed after a newer one is a stale write", variant: "lua+fence",
			sale: sale{initial: 10, stock: 8, orders: []order{
				{sku: "hot", fence: ptr(int64(5)), key: "k1", ms: 10}, {sku: "hot", fence: ptr(int64(3)), key: "k2", ms: 20}}},
			want: Result{Verdict: Breaks, Counts: Counts{StaleWrites: 1}}, kind: StaleWrite,
		},
		{
			name: "two bookings of one seat", variant: "lua",
			sale: sale{initial: 10, stock: 10, bookings: []string{"A1", "A2", "A1"}},
			want: Result{Verdict: Breaks, Counts: Counts{DoubleBookedSeats: 1}}, kind: DoubleBooked,
		},
		{
			name: "a lock key without a TTL is stuck", variant: "lua", sale: sale{initial: 10, stock: 10},
			stuck: []string{"flashsale:lock:sku:hot", "flashsale:lock:sku:other"},
			want:  Result{Verdict: Breaks, Counts: Counts{StuckLocks: 1}}, kind: StuckLock,
		},
		{
			name: "a 201 with no order behind it is a lost acknowledged order", variant: "lua",
			recs: append(seq[:len(seq):len(seq)], ack("lua", "k9", 400)),
			sale: two, want: Result{Verdict: Breaks, Counts: Counts{LostAcknowledgedOrders: 1}}, kind: LostAcknowledgedOrder,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Check(context.Background(), Input{
				Records: tc.recs, DB: saleDB(t, tc.sale), StuckLockKeys: tc.stuck,
				Scopes: []Scope{{Variant: tc.variant, SKUs: []string{"hot"}, Event: "gala", Seats: []string{"A1", "A2"}, StoreGuarded: tc.guarded}},
			})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			got := Result{Verdict: r.Verdict, Counts: r.Counts}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v\nviolations: %+v", got, tc.want, r.Violations)
			}
			switch {
			case tc.kind == "" && r.FirstViolation != nil:
				t.Errorf("unexpected first violation %+v", r.FirstViolation)
			case tc.kind != "" && (r.FirstViolation == nil || r.FirstViolation.Kind != tc.kind):
				t.Errorf("first violation %+v, want kind %s", r.FirstViolation, tc.kind)
			case tc.nemesis != "" && !strings.Contains(strings.Join(r.FirstViolation.Nemesis, ";"), tc.nemesis):
				t.Errorf("first violation names nemesis events %q, want %q among them", r.FirstViolation.Nemesis, tc.nemesis)
			}
		})
	}
}
