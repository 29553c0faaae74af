package inventory

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// Limits of a catalogue and of one request. They keep a workshop reset or a
// load run's body small and make bad input fail early with a clear message.
const (
	// MaxSeats is the most seats an event may have.
	MaxSeats = 1000
	// MaxProducts is the most products a catalogue may list.
	MaxProducts = 1000
	// MaxQty is the most units one order may buy.
	MaxQty = 10
	// MaxUserLen is the longest user name, in bytes.
	MaxUserLen = 64
	// MaxNameLen is the longest product name, in bytes.
	MaxNameLen = 128
	// MaxStock is the most stock one product may start with.
	MaxStock = 1_000_000_000
	// MaxKeyLen is the longest Idempotency-Key, in bytes.
	MaxKeyLen = 128
)

// DefaultEvent is the one event with a seat map; a reset recreates it.
const DefaultEvent = "gala"

var skuPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ProductSpec is one product of a catalogue to reset to.
type ProductSpec struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Stock      int64  `json:"stock"`
}

// Catalogue is what a clean sale starts with: products and the number of
// seats of the one event.
type Catalogue struct {
	Products []ProductSpec `json:"products"`
	Seats    int           `json:"seats"`
}

// DefaultCatalogue is the sale `go run .` starts with and an empty reset
// returns to: one hot SKU, one roomy one, one scarce one, and a 40-seat gala.
func DefaultCatalogue() Catalogue {
	return Catalogue{
		Products: []ProductSpec{
			{SKU: "tee", Name: "Launch T-shirt", PriceCents: 1999, Stock: 50},
			{SKU: "mug", Name: "Limited mug", PriceCents: 1299, Stock: 100},
			{SKU: "sneaker", Name: "Drop sneaker", PriceCents: 12900, Stock: 20},
		},
		Seats: 40,
	}
}

// ErrInvalidCatalogue is returned by Reset for a catalogue that breaks a rule.
var ErrInvalidCatalogue = errors.New("invalid catalogue")

// Validate checks the catalogue against the limits above.
func (c Catalogue) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidCatalogue, fmt.Sprintf(format, args...))
	}
	if c.Seats < 0 || c.Seats > MaxSeats {
		return bad("seats must be between 0 and %d, got %d", MaxSeats, c.Seats)
	}
	if len(c.Products) > MaxProducts {
		return bad("at most %d products, got %d", MaxProducts, len(c.Products))
	}
	seen := make(map[string]bool, len(c.Products))
	for i, p := range c.Products {
		if !skuPattern.MatchString(p.SKU) {
			return bad("products[%d].sku %q must be 1 to 32 letters, digits, '_' or '-'", i, p.SKU)
		}
		if seen[p.SKU] {
			return bad("products[%d].sku %q appears twice", i, p.SKU)
		}
		seen[p.SKU] = true
		if p.Name == "" || len(p.Name) > MaxNameLen {
			return bad("products[%d].name must be 1 to %d bytes", i, MaxNameLen)
		}
		if p.PriceCents < 0 {
			return bad("products[%d].price_cents must not be negative", i)
		}
		if p.Stock < 0 || p.Stock > MaxStock {
			return bad("products[%d].stock must be between 0 and %d", i, MaxStock)
		}
	}
	return nil
}

// seatLabels names n seats in rows of ten: A1..A10, B1..B10, … Z10, AA1 …
func seatLabels(event string, n int) []Seat {
	seats := make([]Seat, 0, n)
	for i := range n {
		row := rowName(i / 10)
		num := i%10 + 1
		seats = append(seats, Seat{EventID: event, Label: row + strconv.Itoa(num), Row: row, Number: num})
	}
	return seats
}

// rowName is the spreadsheet-style name of row i: A … Z, AA, AB, …
func rowName(i int) string {
	name := ""
	for i++; i > 0; i = (i - 1) / 26 {
		name = string(rune('A'+(i-1)%26)) + name
	}
	return name
}
