package traffic

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/internal/randhex"
	"flashsale/loadtest/storefront"
)

// MaxConnsPerHost bounds the connections an attack opens to one instance.
// Past capacity the requests in flight pile up (thousands at 8000/s with a
// 1 s lock wait), and a connection each ran the runner out of file
// descriptors (EMFILE) before the instances were: its own transport errors
// then stood in for the app's answers. A request beyond the bound waits for
// a connection, and that wait is in its latency. (Go raises the soft
// RLIMIT_NOFILE to the hard one at start-up, so the bound, not the limit,
// is what counts.)
const MaxConnsPerHost = 512

// Attack runs one vegeta attack named name and hands each result to each,
// in order, until the attack ends; it stops the attack when ctx ends.
func Attack(ctx context.Context, maxWorkers uint64, tr vegeta.Targeter, p vegeta.Pacer, d time.Duration, name string, each func(*vegeta.Result)) {
	atk, hangUp := newAttacker(maxWorkers)
	defer hangUp()
	results := atk.Attack(tr, p, d, name)
	for {
		var r *vegeta.Result
		var ok bool
		select {
		case r, ok = <-results:
		case <-ctx.Done():
			atk.Stop()
			r, ok = <-results
		}
		if !ok {
			return
		}
		each(r)
	}
}

// newAttacker is a vegeta attacker whose connections the caller closes
// with hangUp once its attack has ended. A new attacker per attack: in
// v12.12.0 one whose attack has ended keeps its stop channel closed and
// never attacks again.
//
// Each attack's shoppers leave when it ends. Left open, a step's
// connections would stay idle until the instances' idle timeout (a
// minute), and a run's later steps would be measured beside every earlier
// step's: thousands of them by the end of a spike run, a goroutine or two
// each in the runner and the instances for the collector to scan, on the
// cores the peak needs.
func newAttacker(maxWorkers uint64) (atk *vegeta.Attacker, hangUp func()) {
	transport := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     vegeta.DefaultTLSConfig,
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: int(min(maxWorkers, MaxConnsPerHost)),
		MaxConnsPerHost:     MaxConnsPerHost,
	}
	atk = vegeta.NewAttacker(
		vegeta.Client(&http.Client{Transport: transport, Timeout: 30 * time.Second}),
		vegeta.Workers(min(16, maxWorkers)),
		vegeta.MaxWorkers(maxWorkers),
		vegeta.MaxBody(16<<10), // orders and errors are small; a runaway body must not be buffered whole
	)
	return atk, transport.CloseIdleConnections
}

// WarmUp is a short attack over every variant before the first measured
// one, its results thrown away: the first requests of a fresh instance pay
// for connections to every Redis node and for cold caches, which would
// otherwise be charged to whichever measurement happens to run first.
type WarmUp struct {
	Variants   []string
	Rate       int
	Duration   time.Duration
	MaxWorkers uint64
	Seed       uint64
	Catalogue  storefront.Catalogue
	Mix        Mix
}

// Run resets the sale, clears the faults and sends the warm-up attack to
// every instance of f. It fails when no request got an answer: then no
// measurement could be judged either.
func (w WarmUp) Run(ctx context.Context, f storefront.Fleet) error {
	setup, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := f.WaitReady(setup); err != nil {
		return err
	}
	if _, err := f.ResetSale(setup, w.Catalogue); err != nil {
		return err
	}
	if err := f.SetFaults(setup, storefront.FaultPlan{}); err != nil {
		return err
	}
	mix := w.Mix
	mix.SeatShare = 0 // seats need the seat map; purchases warm up the same paths
	tr, err := NewTraffic(f.Bases(), w.Variants, mix, w.Seed, "warm-"+NewTag())
	if err != nil {
		return err
	}
	pacer, err := CappedPacer(vegeta.Rate{Freq: w.Rate, Per: time.Second}, uint64(float64(w.Rate)*w.Duration.Seconds())+1)
	if err != nil {
		return err
	}
	atk, hangUp := newAttacker(w.MaxWorkers)
	defer hangUp()
	answered, sent := 0, 0
	for r := range atk.Attack(tr.Targeter(), pacer, w.Duration, "warm-up") {
		sent++
		if r.Code != 0 {
			answered++
		}
	}
	if sent > 0 && answered == 0 {
		return fmt.Errorf("warm-up: none of %d requests got an answer from %s", sent, strings.Join(f.Bases(), ", "))
	}
	return ctx.Err()
}

// NewBar is a progress bar of max requests on w; nil when w is nil.
func NewBar(w io.Writer, max uint64, desc string) *progressbar.ProgressBar {
	if w == nil {
		return nil
	}
	return progressbar.NewOptions64(int64(max),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(24),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("req"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
}

// NewTag is a random tag that keeps one attack's Idempotency-Keys apart
// from another's.
func NewTag() string {
	return randhex.String(4)
}
