// Command targets writes the requests of a flash sale for a plain vegeta
// (or k6) run, and reads vegeta's results back as the sale's answers.
//
//	go run ./loadtest/cmd/targets -url http://127.0.0.1:8080 -orders 1000 -stock 500 -reset > targets.json
//	vegeta attack -format=json -targets=targets.json -rate=200 -duration=5s > results.bin
//	go run ./loadtest/cmd/targets -answers results.bin
//
// Every order is a distinct user with its own Idempotency-Key: a targets
// file that repeats one request measures the replay path, not the sale
// (docs/loadtesting.md). -reset first starts a clean sale with -stock units
// of -sku, so the run measures selling and not a sold-out shelf.
//
// Exit status: 0 done; 1 the reset or reading the results failed; 2 bad
// flags.
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/internal/cli"
	"flashsale/loadtest/output"
	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// sale is what the targets describe.
type sale struct {
	url, sku, variant, tag, format string
	orders, stock                  int
	resend                         float64
	seed                           uint64
	rate                           int
	duration                       time.Duration
	slo                            traffic.SLO
}

// run is the whole command, callable from tests.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("targets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s sale
	fs.StringVar(&s.url, "url", "http://127.0.0.1:8080", "base URL of the storefront (or of the load balancer in front of its replicas)")
	fs.StringVar(&s.sku, "sku", "drop", "the SKU every order buys")
	fs.IntVar(&s.orders, "orders", 1000, "orders to write, each a distinct user and Idempotency-Key (vegeta loops over the file when the attack sends more)")
	fs.IntVar(&s.stock, "stock", 500, "units of -sku the sale starts with (-reset)")
	fs.StringVar(&s.variant, "variant", "", "X-Lock-Variant of every order; empty: the instance's -lock")
	fs.Float64Var(&s.resend, "resend", 0, "share of orders that resend an earlier one, same body and Idempotency-Key, as a client retrying (0 to 1): they measure the replay path")
	fs.StringVar(&s.tag, "tag", "", "prefix of this file's keys and users (default: random, so two files never share a key)")
	fs.Uint64Var(&s.seed, "seed", 1, "seed of which orders are resent")
	fs.StringVar(&s.format, "format", "vegeta", "vegeta (JSON targets, one a line) or k6 (a script)")
	fs.IntVar(&s.rate, "rate", 200, "k6: arrivals per second; with -answers: the rate the attack offered (vegeta's -rate), set beside the rate it sent")
	fs.DurationVar(&s.duration, "duration", 5*time.Second, "k6 only: how long")
	reset := fs.Bool("reset", false, "first start a clean sale on -url (POST /api/admin/reset): -stock units of -sku, no seats; every order, booking and lock key there is removed")
	token := fs.String("admin-token", getenv("FLASHSALE_ADMIN_TOKEN"), "admin token for -reset (env FLASHSALE_ADMIN_TOKEN)")
	slo := fs.String("slo", traffic.DefaultSLOFlag, "the target a sale must meet, p99 of the sales alone and percent of requests shed: the k6 script's thresholds, and -answers says whether it was met")
	answers := fs.String("answers", "", "instead of writing targets, read this vegeta results file (- for stdin) and write the sale's answers as JSON: by status and by error code, distinct orders confirmed, latency by outcome")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: targets [flags] > targets.json\n       targets -answers results.bin\n\nWrites a flash sale's requests for vegeta attack -format=json (or a k6 script), one distinct user and Idempotency-Key an order.\n\n")
		fs.PrintDefaults()
	}
	if exit, ok := cli.Parse(fs, args, stderr); !ok {
		return exit
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "targets: %v\n", err)
		return code
	}
	var err error
	if s.slo, err = traffic.ParseSLO(*slo); err != nil {
		return fail(2, err)
	}
	if *answers != "" {
		offered := 0.0
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "rate" {
				offered = float64(s.rate)
			}
		})
		if err := writeAnswers(*answers, offered, s.slo, stdout); err != nil {
			return fail(1, err)
		}
		return 0
	}
	if s.orders <= 0 || s.stock < 0 || s.resend < 0 || s.resend >= 1 || s.rate <= 0 || s.duration <= 0 {
		return fail(2, errors.New("-orders, -rate and -duration must be positive, -stock not negative, -resend in [0, 1)"))
	}
	s.url = strings.TrimRight(s.url, "/")
	if s.tag == "" {
		s.tag = randomTag()
	}
	if *reset {
		if *token == "" {
			return fail(2, errors.New("-reset needs the admin token (-admin-token or FLASHSALE_ADMIN_TOKEN)"))
		}
		cat := storefront.Catalogue{Products: []storefront.Product{{SKU: s.sku, Name: "Flash drop", PriceCents: 1999, Stock: int64(s.stock)}}}
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := storefront.API{Base: s.url, Token: *token}.Reset(c, cat)
		cancel()
		if err != nil {
			return fail(1, err)
		}
		fmt.Fprintf(stderr, "targets: %s reset: %d units of %s, no orders\n", s.url, s.stock, s.sku)
	}
	switch s.format {
	case "vegeta":
		err = s.writeVegeta(stdout)
	case "k6":
		err = s.writeK6(stdout)
	default:
		return fail(2, fmt.Errorf("-format %q: want vegeta or k6", s.format))
	}
	if err != nil {
		return fail(1, err)
	}
	return 0
}

// writeVegeta writes one JSON target a line. The key also rides in the URL
// fragment, which is never sent but which vegeta keeps in every result: the
// results file then says which order each answer belongs to (-answers).
func (s sale) writeVegeta(w io.Writer) error {
	enc := vegeta.NewJSONTargetEncoder(w)
	rng := rand.New(rand.NewPCG(s.seed, s.seed^0x5eed))
	var sent []int
	for i := range s.orders {
		n := i
		if len(sent) > 0 && rng.Float64() < s.resend {
			n = sent[rng.IntN(len(sent))]
		} else {
			sent = append(sent, i)
		}
		key := fmt.Sprintf("%s-%d", s.tag, n)
		body, _ := json.Marshal(map[string]any{"sku": s.sku, "qty": 1, "user": "u-" + key}) // strings and an int always marshal
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
		if s.variant != "" {
			h.Set("X-Lock-Variant", s.variant)
		}
		t := vegeta.Target{Method: http.MethodPost, URL: s.url + "/api/orders#" + traffic.KeyFragment + key, Body: body, Header: h}
		if err := enc.Encode(&t); err != nil {
			return err
		}
	}
	return nil
}

// Answers is what -answers writes: the tally of the results, as the load
// runner tallies a cell, and whether the sale met the SLO.
type Answers struct {
	traffic.Summary
	SLO    traffic.SLO `json:"slo"`
	SLOMet bool        `json:"slo_met"`
}

// writeAnswers tallies a vegeta results file the way the load runner
// tallies a cell: statuses, error codes, distinct orders and replays,
// latency by outcome, when the stock ran out; offered is the rate the
// attack was asked for (0: not said).
func writeAnswers(path string, offered float64, slo traffic.SLO, w io.Writer) error {
	var in io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	dec := vegeta.NewDecoder(in)
	tally := traffic.NewTally()
	for {
		var r vegeta.Result
		if err := dec.Decode(&r); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		tally.Add(&r)
	}
	sum := tally.Summary()
	sum.Offered = offered
	return output.JSON(w, Answers{Summary: sum, SLO: slo, SLOMet: slo.Met(sum)})
}

func randomTag() string {
	b := make([]byte, 4)
	_, _ = crand.Read(b) // crypto/rand.Read never fails on the platforms Go supports
	return "t" + hex.EncodeToString(b)
}
