package inventory

import "time"

// Product is one SKU on sale. InitialStock is what the sale started with, so
// the audit can tell sold units from lost updates without any other record.
type Product struct {
	SKU          string `gorm:"primaryKey;size:32" json:"sku"`
	Name         string `gorm:"size:128;not null" json:"name"`
	PriceCents   int64  `gorm:"not null" json:"price_cents"`
	Stock        int64  `gorm:"not null" json:"stock"`
	InitialStock int64  `gorm:"not null" json:"initial_stock"`
	// Fence is the highest fencing token registered for this row. A fenced
	// holder raises it before reading and writes only where it still finds
	// its own token, so a stale holder's write is refused.
	Fence int64 `gorm:"not null;default:0" json:"-"`
	// Sale is the sale this row belongs to; every reset starts a new one. A
	// write carries the sale its request began in and changes the row only
	// if it still belongs to that sale, so a request in flight across a reset
	// cannot land in the new sale's figures.
	Sale int64 `gorm:"not null;default:0" json:"-"`
}

// Event is something with a seat map, such as the default "gala".
type Event struct {
	ID   string `gorm:"primaryKey;size:32" json:"event"`
	Name string `gorm:"size:128;not null" json:"name"`
}

// Seat is one seat of an event. It exists before anyone books it, so the
// fencing token of a seat grab has a row to be registered on.
type Seat struct {
	EventID string `gorm:"primaryKey;size:32" json:"-"`
	Label   string `gorm:"primaryKey;size:16" json:"seat"`
	Row     string `gorm:"size:8;not null" json:"row"`
	Number  int    `gorm:"not null" json:"number"`
	Fence   int64  `gorm:"not null;default:0" json:"-"`
	Sale    int64  `gorm:"not null;default:0" json:"-"` // as Product.Sale
	// Booked is set by every booking's write; only db-guard's write is
	// conditional on it (db_guard.go), so no lock rung is guarded by it.
	Booked bool `gorm:"not null;default:false" json:"-"`
}

// Order is one sale. Lock and Fence record the variant and token that
// guarded it, so a bad order can be traced to the lock that let it through.
type Order struct {
	ID    uint64 `gorm:"primaryKey" json:"id"`
	SKU   string `gorm:"size:32;not null;index" json:"sku"`
	Qty   int64  `gorm:"not null" json:"qty"`
	User  string `gorm:"column:user_name;size:64;not null;index;uniqueIndex:idx_orders_user_key,priority:1" json:"user"`
	Lock  string `gorm:"size:16;not null" json:"lock"`
	Fence *int64 `json:"fence"`
	// IdempotencyKey is unique per user where set: that is the idempotency
	// contract (one order per user and key), not a guard that would hide a
	// lock failure. Scoped to the user, a key says nothing to another
	// shopper; scoped to this table, it is one order's key, whatever
	// bookings carry the same one.
	IdempotencyKey *string `gorm:"size:128;uniqueIndex:idx_orders_user_key,priority:2" json:"idempotency_key,omitempty"`
	// RequestHash tells a retry of the same request from a reuse of its key
	// for a different one.
	RequestHash string    `gorm:"size:64;not null;default:''" json:"-"`
	TotalCents  int64     `gorm:"not null;default:0" json:"total_cents"`
	CreatedAt   time.Time `json:"created_at"`
	// StockLeft is the SKU's stock that the transaction which wrote this
	// order left in the row: only in the answer of the sale that made it,
	// never stored. A client-side history is sharper with it: two sales
	// that leave the same stock are a lost update the shopper can see.
	StockLeft *int64 `gorm:"-" json:"stock_left,omitempty"`
}

// Booking is one seat grab. In workshop mode nothing in the schema stops two
// bookings of one seat: only the lock (and the fence, when on) does, so a
// broken lock shows up as a double booking in the audit.
type Booking struct {
	ID             uint64    `gorm:"primaryKey" json:"id"`
	EventID        string    `gorm:"size:32;not null;index:idx_bookings_event_seat" json:"event"`
	Seat           string    `gorm:"size:16;not null;index:idx_bookings_event_seat" json:"seat"`
	User           string    `gorm:"column:user_name;size:64;not null;index;uniqueIndex:idx_bookings_user_key,priority:1" json:"user"`
	Lock           string    `gorm:"size:16;not null" json:"lock"`
	Fence          *int64    `json:"fence"`
	IdempotencyKey *string   `gorm:"size:128;uniqueIndex:idx_bookings_user_key,priority:2" json:"idempotency_key,omitempty"` // as Order's`
	RequestHash    string    `gorm:"size:64;not null;default:''" json:"-"`
	CreatedAt      time.Time `json:"created_at"`
}
