package handlers

import (
	"errors"
	"flashsale/curriculum"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// Defaults of the limits a public storefront needs (docs/operations.md,
// "Limits"). A zero in Config takes these; the order rate has none, since
// main decides it from the mode.
const (
	DefaultMaxStreams          = 1000
	DefaultMaxStreamsPerClient = 8
	DefaultOrderBurst          = 10
	DefaultBodyTimeout         = 10 * time.Second
	DefaultAuditInterval       = time.Second
	DefaultMaxInFlight         = 256
)

// limitNames label flashsale_limit_refusals_total: every limit that can
// refuse a request, so each series exists from the start.
var limitNames = []string{"streams", "streams_per_client", "order_rate", "body_timeout", "variant", "in_flight", "admin_logins", "connections_per_client"}

// CorrectVariants are the rungs the ladder declares correct
// (lock/ladder.go), in ladder order: the only ones the production mode
// allows.
func CorrectVariants() []string {
	var out []string
	for _, r := range curriculum.Lessons() {
		if r.Correct {
			out = append(out, r.Name)
		}
	}
	return out
}

// clientKey is who a request counts against: the client address Gin
// reports (the peer, or the forwarded address when it came through a
// trusted proxy), an IPv6 address by its /64, the block one host is usually
// given.
func clientKey(c *gin.Context) string {
	addr := c.ClientIP()
	ip := net.ParseIP(addr)
	if ip == nil {
		return addr
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// variant is the lock variant a request asks for in X-Lock-Variant, or the
// server's default; a name outside the allow-list is refused with the list,
// and a broken rung named by a client from the room without the ladder
// open to it is refused too (room.go).
func (s *Server) variant(c *gin.Context) (string, error) {
	v := strings.TrimSpace(c.GetHeader("X-Lock-Variant"))
	if v == "" {
		return s.defaultLock, nil
	}
	if !slices.Contains(s.variants, v) {
		if !slices.Contains(curriculum.Names(), v) {
			return "", errorf("unknown_lock", "X-Lock-Variant %q; this instance allows %s, or no header for %s", v, strings.Join(s.variants, ", "), s.defaultLock)
		}
		return "", errorf("variant_not_allowed", "X-Lock-Variant %q; this instance allows %s, or no header for %s", v, strings.Join(s.variants, ", "), s.defaultLock)
	}
	if !s.mayName(c, v) {
		return "", errorf("variant_not_allowed", "X-Lock-Variant %q is a broken lock: here only this machine's own clients and the workshop (its admin token) may name it, and a room may once the facilitator starts the instance with -open-ladder; send no header for %s", v, s.defaultLock)
	}
	return v, nil
}

// streamLimit bounds the open streams, in all and per client.
type streamLimit struct {
	max, perClient int

	mu       sync.Mutex
	total    int
	byClient map[string]int
}

// open counts a new stream of client, or refuses it; done uncounts it.
func (l *streamLimit) open(client string) (done func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byClient[client] >= l.perClient:
		return nil, errorf("too_many_streams", "at most %d per address", l.perClient)
	case l.total >= l.max:
		return nil, errorf("streams_full", "%d open", l.total)
	}
	l.total++
	l.byClient[client]++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.total--
		if l.byClient[client]--; l.byClient[client] <= 0 {
			delete(l.byClient, client)
		}
	}), nil
}

// openStream admits a stream of this request's client, or refuses it.
func (s *Server) openStream(c *gin.Context) (done func(), err error) {
	return s.streams.open(clientKey(c))
}

// rateLimit is a token bucket per client. A client idle long enough for its
// bucket to refill is forgotten: a full bucket is what a new one would be.
type rateLimit struct {
	every rate.Limit
	burst int

	mu      sync.Mutex
	clients map[string]*rate.Limiter
	swept   time.Time
}

// sweepEvery is how often forgotten clients are looked for.
const sweepEvery = time.Minute

// allow takes a token of client's bucket, or says how long until one is
// there.
func (l *rateLimit) allow(client string, now time.Time) (ok bool, retry time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	r := l.limiter(client).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// empty says whether client's bucket has no token left, and how long until
// it has one, without taking any: a client that never spent one has a full
// bucket.
func (l *rateLimit) empty(client string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.clients[client]
	if lim == nil {
		return false, 0
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) / float64(l.every) * float64(time.Second))
}

// spend takes a token of client's bucket if one is there.
func (l *rateLimit) spend(client string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	l.limiter(client).AllowN(now, 1)
}

// sweep forgets, once per sweepEvery, the clients whose bucket is full
// again. The caller holds mu.
func (l *rateLimit) sweep(now time.Time) {
	if now.Sub(l.swept) < sweepEvery {
		return
	}
	for k, lim := range l.clients {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.clients, k)
		}
	}
	l.swept = now
}

// limiter is client's bucket, made full on first use. The caller holds mu.
func (l *rateLimit) limiter(client string) *rate.Limiter {
	lim := l.clients[client]
	if lim == nil {
		lim = rate.NewLimiter(l.every, l.burst)
		l.clients[client] = lim
	}
	return lim
}

// limitOrders holds each client to the order rate: orders and seat grabs
// share one bucket per client. With no rate it lets everything through, and
// with OrderRateSparesOwnMachine so it does the requests of this machine's
// own clients (room.go).
func (s *Server) limitOrders(c *gin.Context) error {
	if s.orders == nil || (s.ordersSpareOwnMachine && ownMachine(c)) {
		c.Next()
		return nil
	}
	if ok, retry := s.orders.allow(clientKey(c), time.Now()); !ok {
		return &Error{Code: "rate_limited", RetryAfter: retry,
			Detail: "at most " + strconv.FormatFloat(float64(s.orders.every), 'f', -1, 64) +
				" orders a second per address, in bursts of " + strconv.Itoa(s.orders.burst)}
	}
	c.Next()
	return nil
}

// bodyDeadline gives a request with a body bodyTimeout to send it all: the
// connection's read deadline, cleared once the body has been read, so the
// handler's own work (a sale waiting for its lock) is not cut short.
func (s *Server) bodyDeadline(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody || (r.ContentLength == 0 && len(r.TransferEncoding) == 0) {
		c.Next()
		return
	}
	rc := http.NewResponseController(c.Writer)
	if err := rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)); err != nil {
		c.Next() // a writer without deadlines (a test recorder): nothing to bound
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, clear: sync.OnceFunc(func() { _ = rc.SetReadDeadline(time.Time{}) })}
	c.Next()
}

// deadlineBody clears the read deadline when the body ends.
type deadlineBody struct {
	io.ReadCloser
	clear func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !isTimeout(err) {
		b.clear()
	}
	return n, err
}

// isTimeout reports whether a read failed on its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
