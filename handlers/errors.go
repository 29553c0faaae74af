package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"flashsale/inventory"
	"flashsale/lock"
)

// StatusClientClosedRequest is nginx's 499: the client went away before the
// answer. It is only logged and counted; nobody is left to read it.
const StatusClientClosedRequest = 499

// outcome is one row of the error table: the status and a message a person
// can act on. showDetail lets the error's own text (written for shoppers by
// the inventory package or a decoder) follow the message.
type outcome struct {
	status     int
	message    string
	retryAfter string
	showDetail bool
	// limit names the limit that refused the request, counted in
	// flashsale_limit_refusals_total.
	limit string
	// shed marks the answers that turn work away by design (this instance
	// full, the lock busy): past capacity they come thousands a second,
	// and writing a warning for each would take the CPU the admitted
	// requests need. They are logged at debug level and counted in the
	// metrics instead.
	shed bool
}

// errorTable is the one place where an error code gets its status and
// message. Every error a client sees has a code from this table.
var errorTable = map[string]outcome{
	"bad_json":               {status: http.StatusBadRequest, message: "The request body is not valid JSON of the expected shape.", showDetail: true},
	"unknown_field":          {status: http.StatusBadRequest, message: "The request body has a field this route does not accept; remove it.", showDetail: true},
	"unsupported_media_type": {status: http.StatusUnsupportedMediaType, message: "Send the body as JSON with Content-Type: application/json."},
	"body_too_large":         {status: http.StatusRequestEntityTooLarge, message: "The request body is too large for this route.", showDetail: true},
	"invalid_user":           {status: http.StatusUnprocessableEntity, message: "Give a user name of 1 to 64 printable characters.", showDetail: true},
	"invalid_qty":            {status: http.StatusUnprocessableEntity, message: fmt.Sprintf("Order between 1 and %d units.", inventory.MaxQty), showDetail: true},
	"invalid_idempotency_key": {status: http.StatusBadRequest,
		message: fmt.Sprintf("An Idempotency-Key is 1 to %d visible ASCII characters.", inventory.MaxKeyLen), showDetail: true},
	"invalid_catalogue": {status: http.StatusUnprocessableEntity, message: "The catalogue breaks a rule; fix the field named below.", showDetail: true},
	"invalid_fault":     {status: http.StatusUnprocessableEntity, message: "The fault plan is not valid; fix the entry named below.", showDetail: true},
	"unknown_sku":       {status: http.StatusNotFound, message: "No product has this SKU; GET /api/products lists them.", showDetail: true},
	"unknown_event":     {status: http.StatusNotFound, message: fmt.Sprintf("No event has this name; the sale has one, %q (GET /api/events/%s/seats).", inventory.DefaultEvent, inventory.DefaultEvent), showDetail: true},
	"unknown_seat":      {status: http.StatusNotFound, message: "The event has no such seat; GET its seat map for the labels.", showDetail: true},
	"unknown_lock":      {status: http.StatusBadRequest, message: "No lock variant has the name given below; use one it lists.", showDetail: true},
	"variant_not_allowed": {status: http.StatusBadRequest, limit: "variant", showDetail: true,
		message: "This instance does not allow the lock variant named below; use one it lists."},
	"too_many_streams": {status: http.StatusTooManyRequests, retryAfter: "10", limit: "streams_per_client", showDetail: true,
		message: "Too many live streams are open from your address; close one (another tab), then retry."},
	"streams_full": {status: http.StatusServiceUnavailable, retryAfter: "10", limit: "streams", showDetail: true,
		message: "This instance serves as many live streams as it can; retry shortly."},
	"rate_limited": {status: http.StatusTooManyRequests, retryAfter: "1", limit: "order_rate", showDetail: true,
		message: "Too many orders from your address; wait for the time in Retry-After, then retry."},
	"too_many_logins": {status: http.StatusTooManyRequests, retryAfter: "10", limit: "admin_logins", showDetail: true,
		message: "Too many wrong admin tokens from your address; wait for the time in Retry-After, then send the token the server printed at start-up."},
	"too_many_connections": {status: http.StatusTooManyRequests, retryAfter: "10", limit: "connections_per_client",
		message: "Too many open connections from your address; close some (other tabs, a load tool's pool), then retry."},
	"body_timeout": {status: http.StatusRequestTimeout, limit: "body_timeout", showDetail: true,
		message: "The request body arrived too slowly; send it whole, at once."},
	"sold_out":   {status: http.StatusConflict, message: "Not enough stock left for this order."},
	"seat_taken": {status: http.StatusConflict, message: "Someone else has this seat; pick another."},
	"stale_fence": {status: http.StatusConflict,
		message: "Your request's lock lease expired while it worked and a newer holder took over; its write was refused. Retry."},
	"lease_lost": {status: http.StatusConflict,
		message: "Your request's lock lease ran out while it worked, and its check before writing caught it; nothing was written. Retry."},
	"sale_reset": {status: http.StatusConflict,
		message: "The sale was reset while this request was in flight; nothing was sold or booked. Reload the page and try again."},
	"idempotency_key_reused": {status: http.StatusUnprocessableEntity,
		message: "This Idempotency-Key was already used for a different request; use a new key."},
	"lock_busy": {status: http.StatusServiceUnavailable, retryAfter: "1", shed: true,
		message: "Too many shoppers on this item right now; retry in a moment."},
	"overloaded": {status: http.StatusServiceUnavailable, retryAfter: "1", limit: "in_flight", showDetail: true, shed: true,
		message: "This instance is selling as fast as it can and takes no more orders right now; nothing was sold or booked. Retry in a moment."},
	"lock_unavailable": {status: http.StatusServiceUnavailable, retryAfter: "2",
		message: "Too few Redis nodes can vote right now (down, or restarted less than a lock TTL ago); nothing was sold or booked. Retry shortly."},
	"store_unavailable": {status: http.StatusServiceUnavailable, retryAfter: "5",
		message: "The store's database cannot be reached or did not answer in time; retry in a few seconds. With the same Idempotency-Key a retry is never sold or booked twice."},
	"holder_crashed": {status: http.StatusServiceUnavailable, retryAfter: "1",
		message: "An injected crash abandoned this request; the lock was left as a crashed process leaves it. Nothing was sold."},
	"invalid_run":        {status: http.StatusUnprocessableEntity, message: "The workshop run is not valid; fix the field named below.", showDetail: true},
	"unknown_run":        {status: http.StatusNotFound, message: "No workshop run has this id; GET /api/admin/workshop/runs lists them.", showDetail: true},
	"run_in_progress":    {status: http.StatusConflict, message: "A workshop run is in progress; wait for its result, then run again."},
	"unauthorized":       {status: http.StatusUnauthorized, message: "This route needs Authorization: Bearer <admin token>. The token is printed at the first start-up (later ones name the file that keeps it) unless set with -admin-token or FLASHSALE_ADMIN_TOKEN."},
	"not_found":          {status: http.StatusNotFound, message: "No such route; see the API list at /api."},
	"method_not_allowed": {status: http.StatusMethodNotAllowed, message: "This route does not accept that method."},
	"not_ready":          {status: http.StatusServiceUnavailable, retryAfter: "1", message: "Not ready: the database is unreachable, or too few Redis nodes can vote (down, or restarted less than a lock TTL ago).", showDetail: true},
	"draining":           {status: http.StatusServiceUnavailable, retryAfter: "1", message: "This instance is shutting down: it finishes what it has and takes no new traffic from a load balancer. Other replicas serve."},
	"internal":           {status: http.StatusInternalServerError, message: "Something went wrong on our side; it has been logged. Retry later."},
}

// domainCodes maps the errors of the packages below to codes, first match
// wins. Anything unmatched is internal.
var domainCodes = []struct {
	target error
	code   string
}{
	{inventory.ErrInvalidUser, "invalid_user"},
	{inventory.ErrInvalidQty, "invalid_qty"},
	{inventory.ErrInvalidKey, "invalid_idempotency_key"},
	{inventory.ErrInvalidCatalogue, "invalid_catalogue"},
	{inventory.ErrUnknownSKU, "unknown_sku"},
	{inventory.ErrUnknownEvent, "unknown_event"},
	{inventory.ErrUnknownSeat, "unknown_seat"},
	{lock.ErrUnknownVariant, "unknown_lock"},
	{inventory.ErrSoldOut, "sold_out"},
	{inventory.ErrSeatTaken, "seat_taken"},
	{inventory.ErrStaleFence, "stale_fence"},
	{inventory.ErrSaleReset, "sale_reset"},
	{inventory.ErrIdempotencyKeyReused, "idempotency_key_reused"},
	{inventory.ErrHolderCrashed, "holder_crashed"},
	{inventory.ErrLeaseLost, "lease_lost"},
	{inventory.ErrStoreUnavailable, "store_unavailable"},
	{inventory.ErrLockUnavailable, "lock_unavailable"},
	{inventory.ErrLockBusy, "lock_busy"},
}

// Error is an error with a code from the table. Detail, when set, is shown
// to the client (for codes that show details); Err is only logged;
// RetryAfter, when set, replaces the table's Retry-After for this answer.
type Error struct {
	Code       string
	Detail     string
	Err        error
	RetryAfter time.Duration
}

// Error is the code and what went wrong, for the log.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Detail
}

// Unwrap exposes the logged cause to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// errorf makes an *Error whose detail is shown to the client.
func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// classify finds the code of err.
func classify(err error) (code, detail string, retry time.Duration) {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code, e.Detail, e.RetryAfter
	}
	for _, d := range domainCodes {
		if errors.Is(err, d.target) {
			return d.code, err.Error(), 0
		}
	}
	return "internal", "", 0
}

// render answers err from the table, in one place for every route. A client
// that went away gets no answer, only a 499 in the log and the metrics; a 5xx
// is logged with everything known, while the client sees the generic message.
func (s *Server) render(c *gin.Context, err error) {
	// The request's fields are added only to a line that is written: a shed
	// answer is logged at debug level, and under a spike there are thousands
	// a second, each of which would otherwise build a logger for nothing.
	ctx := c.Request.Context()
	log := func(level slog.Level, msg string, args ...any) {
		if s.log.Enabled(ctx, level) {
			s.log.Log(ctx, level, msg, append([]any{"method", c.Request.Method, "path", c.Request.URL.Path, "route", route(c)}, args...)...)
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		log(slog.LevelInfo, "client went away before the answer", "status", StatusClientClosedRequest, "err", err)
		c.AbortWithStatus(StatusClientClosedRequest)
		return
	}
	code, detail, retry := classify(err)
	out, ok := errorTable[code]
	if !ok {
		code, out = "internal", errorTable["internal"]
	}
	switch {
	case out.status >= 500 && code == "internal":
		log(slog.LevelError, "request failed", "status", out.status, "code", code, "err", err)
	case out.shed:
		c.Set(shedKey, true)
		log(slog.LevelDebug, "request shed", "status", out.status, "code", code, "err", err)
	case out.status >= 500:
		log(slog.LevelWarn, "request refused", "status", out.status, "code", code, "err", err)
	default:
		log(slog.LevelDebug, "bad request", "status", out.status, "code", code, "err", err)
	}
	msg := out.message
	if out.showDetail && detail != "" {
		msg += " (" + detail + ")"
	}
	if out.limit != "" {
		s.metrics.refusals.WithLabelValues(out.limit).Inc()
	}
	switch {
	case retry > 0:
		c.Header("Retry-After", strconv.FormatInt(int64(math.Ceil(retry.Seconds())), 10))
	case out.retryAfter != "":
		c.Header("Retry-After", out.retryAfter)
	}
	if code == "body_timeout" {
		c.Header("Connection", "close") // the rest of the body may still trickle in
	}
	if code == "unauthorized" {
		c.Header("WWW-Authenticate", `Bearer realm="flashsale admin"`)
	}
	c.AbortWithStatusJSON(out.status, errorBody{Error: code, Message: msg})
}

// recovered turns a panic into a logged 500, so one bad request never takes
// the process down.
func (s *Server) recovered(c *gin.Context, rec any) {
	s.log.Error("panic in handler", "panic", rec, "stack", string(debug.Stack()))
	s.render(c, fmt.Errorf("panic: %v", rec))
}

// shedKey marks a request answered with a shed outcome, for logRequests.
const shedKey = "flashsale.shed"

// logLevel picks how loudly a finished request is logged: a shed answer
// quietly, like every answer below 500.
func logLevel(status int, shed bool) slog.Level {
	if status >= 500 && !shed {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// RawAnswer is a whole HTTP/1.1 answer of code from the table, closing the
// connection: for a listener that refuses a connection before any request
// was read (main's cap on connections per address), so the refusal is the
// same JSON every route gives.
func RawAnswer(code string) []byte {
	out, ok := errorTable[code]
	if !ok {
		code, out = "internal", errorTable["internal"]
	}
	body, _ := json.Marshal(errorBody{Error: code, Message: out.message})
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n",
		out.status, http.StatusText(out.status), len(body))
	if out.retryAfter != "" {
		head += "Retry-After: " + out.retryAfter + "\r\n"
	}
	return append([]byte(head+"\r\n"), body...)
}

// Refused counts a request refused outside the handlers (the cap on
// connections per address) under the limit of code's row, as render does.
func (m *Metrics) Refused(code string) {
	if out := errorTable[code]; out.limit != "" {
		m.refusals.WithLabelValues(out.limit).Inc()
	}
}
