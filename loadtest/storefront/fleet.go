package storefront

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"flashsale/internal/clock"
)

// Fleet is every instance of one storefront under attack: they share one
// database and one set of Redis nodes, and each has its own fault plan.
type Fleet []API

// NewFleet is a client of every instance at bases, all with one admin token.
func NewFleet(bases []string, token string) Fleet {
	out := make(Fleet, len(bases))
	for i, b := range bases {
		out[i] = API{Base: b, Token: token}
	}
	return out
}

// Each calls fn on every instance in parallel and returns the first error.
func (f Fleet) Each(ctx context.Context, fn func(context.Context, API) error) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, a := range f {
		g.Go(func() error { return fn(ctx, a) })
	}
	return g.Wait()
}

// WaitReady waits until every instance is ready, or ctx ends.
func (f Fleet) WaitReady(ctx context.Context) error {
	for _, a := range f {
		if err := a.WaitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// SetFaults gives every instance the plan p.
func (f Fleet) SetFaults(ctx context.Context, p FaultPlan) error {
	return f.Each(ctx, func(ctx context.Context, a API) error { return a.SetFaults(ctx, p) })
}

// Fired sums the fault counters of every instance, by point.
func (f Fleet) Fired(ctx context.Context) (map[string]uint64, error) {
	total := map[string]uint64{}
	var mu sync.Mutex
	err := f.Each(ctx, func(ctx context.Context, a API) error {
		fired, err := a.Fired(ctx)
		mu.Lock()
		defer mu.Unlock()
		for p, n := range fired {
			total[p] += n
		}
		return err
	})
	return total, err
}

// ResetSale resets the sale through the first instance, retrying briefly:
// right after a node fault a reset can find a node still coming back.
func (f Fleet) ResetSale(ctx context.Context, cat Catalogue) (ResetState, error) {
	var err error
	for try := 0; try < 10; try++ {
		var st ResetState
		if st, err = f[0].Reset(ctx, cat); err == nil {
			if st.Event == "" {
				st.Event = "gala"
			}
			return st, nil
		}
		var ae *APIError
		if errors.As(err, &ae) && ae.Status/100 == 4 {
			return ResetState{}, err // the request is wrong; retrying will not help
		}
		if !clock.Sleep(ctx, 200*time.Millisecond) {
			break
		}
	}
	return ResetState{}, err
}

// Bases are the instances' base URLs, in order.
func (f Fleet) Bases() []string {
	out := make([]string, len(f))
	for i, a := range f {
		out[i] = a.Base
	}
	return out
}
