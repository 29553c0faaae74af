package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"flashsale/internal/testsupport"
	"flashsale/inventory"
)

// CeilingSKUs are the product counts the store's ceiling is measured at:
// the hot SKUs of the load runner's scale run.
var ceilingSKUs = []int{1, 10, 100, 1000}

// BenchmarkStoreCeiling is what the store alone writes a second: the sale's
// own transaction (the new stock and the order, as every lock rung commits
// it), with no lock and no read before it, from as many writers as there
// are products (at most 16), each product written by one writer at a time
// as a lock would have it. No lock sells faster than this on the same database;
// the load runner's scale run draws it as its limit line from the
// writes/s metric.
func BenchmarkStoreCeiling(b *testing.B) {
	nodes := testsupport.Redis(b, 1)
	ctx := context.Background()
	for _, d := range testsupport.Databases() {
		for _, n := range ceilingSKUs {
			b.Run(fmt.Sprintf("%s/skus=%d", d.Name, n), func(b *testing.B) {
				s := newSale(b, d.DSN(b), nodes, inventory.Config{})
				cat := inventory.Catalogue{}
				for i := range n {
					cat.Products = append(cat.Products, inventory.ProductSpec{SKU: fmt.Sprintf("s%d", i), Name: "Bulk", PriceCents: 100, Stock: 1_000_000_000})
				}
				if _, err := s.svc.Reset(ctx, cat); err != nil {
					b.Fatal(err)
				}
				writes := make([]func(string) error, n)
				for i, p := range cat.Products {
					w, err := inventory.SaleWriter(ctx, s.svc, p.SKU)
					if err != nil {
						b.Fatal(err)
					}
					writes[i] = w
				}
				// At most one writer per SKU, as a lock lets the sale run:
				// writer g writes SKUs g, g+w, g+2w, … in turn.
				w := min(16, n)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for g := range w {
					own := (n - g + w - 1) / w
					wg.Go(func() {
						for k := 0; ; k++ {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							if err := writes[g+w*(k%own)](fmt.Sprintf("u%d", i)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			})
		}
	}
}
