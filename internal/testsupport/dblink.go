package testsupport

import (
	"net/url"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// DBLink is a TCP proxy on a loopback port in front of the test PostgreSQL
// server, for a test that needs the database to go away and come back: the
// shared server itself must keep running for every other test.
type DBLink struct {
	proxy *toxiproxy.Proxy
}

// ProxiedPostgres is Postgres (a schema of the test's own) reached through
// a DBLink, and the link. The proxy is stopped when the test ends.
func ProxiedPostgres(tb testing.TB) (string, *DBLink) {
	tb.Helper()
	dsn := Postgres(tb)
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("parse %s: %v", dsn, err)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "postgres", "127.0.0.1:0", u.Host)
	if err := p.Start(); err != nil {
		tb.Fatalf("proxy to PostgreSQL at %s: %v", u.Host, err)
	}
	tb.Cleanup(p.Stop)
	u.Host = p.Listen
	return u.String(), &DBLink{proxy: p}
}

// Cut closes the proxy's port and every connection through it: a dial is
// refused, a connection in use breaks, as when the server stops.
func (l *DBLink) Cut() { l.proxy.Stop() }

// Mend opens the proxy again on the same port.
func (l *DBLink) Mend(tb testing.TB) {
	tb.Helper()
	if err := l.proxy.Start(); err != nil {
		tb.Fatalf("reopen the proxy on %s: %v", l.proxy.Listen, err)
	}
}
