package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// What an instance keeps from a room on a shared network. Its own machine
// (the facilitator's terminal and browser, the load runner, the labs' curl)
// may do everything the workshop needs; a client from the room is a
// shopper: it buys under the correct locks, at a per-client rate, sees no
// other shopper's name, and guesses the admin token only a few times.

// Failed admin logins: a client may present a wrong token loginBurst times
// at once, then one more every loginEvery; past that it is answered 429
// too_many_logins before its token is even compared.
const (
	loginBurst = 10
	loginEvery = 10 * time.Second
)

// adminKey caches, per request, whether it carries the admin token.
const adminKey = "flashsale.admin"

// IsOwnMachine reports whether ip is this machine's own loopback address,
// 127.0.0.1 or ::1: where the facilitator's terminal, browser and load
// runner reach an instance from. Other addresses, other loopback ones
// included, count as the room's.
func IsOwnMachine(ip net.IP) bool {
	return ip != nil && (ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback))
}

// ownMachine reports whether the request's client (the peer, or the address
// a trusted proxy forwarded) is this machine.
func ownMachine(c *gin.Context) bool {
	return IsOwnMachine(net.ParseIP(c.ClientIP()))
}

// newLoginLimit is the bucket per client of failed admin logins.
func newLoginLimit() *rateLimit {
	return &rateLimit{every: rate.Every(loginEvery), burst: loginBurst, clients: map[string]*rate.Limiter{}}
}

// checkAdmin reports whether the request carries the admin bearer token.
// Both sides are hashed first, so the comparison takes the same time
// whatever the token's length or how much of it matches; the scheme's name
// is case-insensitive (RFC 9110, section 11.1). A request without an
// Authorization header is simply not the admin's; one with a wrong token
// spends one of its client's failed logins, and a client with none left is
// refused 429 too_many_logins before its token is compared. The answer is
// kept in the request, so a second look costs nothing and counts nothing.
func (s *Server) checkAdmin(c *gin.Context) (bool, error) {
	if v, ok := c.Get(adminKey); ok {
		return v.(bool), nil
	}
	h := strings.TrimSpace(c.GetHeader("Authorization"))
	if h == "" {
		c.Set(adminKey, false)
		return false, nil
	}
	client, now := clientKey(c), time.Now()
	if empty, retry := s.logins.empty(client, now); empty {
		return false, &Error{Code: "too_many_logins", RetryAfter: retry,
			Detail: fmt.Sprintf("%d refused tokens at once, then one every %v per address", loginBurst, loginEvery)}
	}
	scheme, token, _ := strings.Cut(h, " ")
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	ok := strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare(got[:], s.adminHash[:]) == 1
	if !ok {
		s.logins.spend(client, now)
		s.log.Info("admin token refused", "client", client)
	}
	c.Set(adminKey, ok)
	return ok, nil
}

// mayName reports whether this request may name the allowed variant v: the
// default and the correct rungs anyone may; a broken rung only this
// machine's own clients and the workshop (the admin token) may, unless the
// ladder is open to the room (-open-ladder). A wrong token counts as a
// failed login, as anywhere.
func (s *Server) mayName(c *gin.Context, v string) bool {
	if s.openLadder || v == s.defaultLock || slices.Contains(CorrectVariants(), v) || ownMachine(c) {
		return true
	}
	ok, _ := s.checkAdmin(c)
	return ok
}

// namable are the allowed variants this request may name, for GET /api.
func (s *Server) namable(c *gin.Context) []string {
	out := make([]string, 0, len(s.variants))
	for _, v := range s.variants {
		if s.mayName(c, v) {
			out = append(out, v)
		}
	}
	return out
}

// secureHeaders tells every browser not to guess a content type: an answer
// is what its Content-Type says, never a script or a page sniffed from it.
func secureHeaders(c *gin.Context) {
	c.Header("X-Content-Type-Options", "nosniff")
	c.Next()
}
