package deploy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/curriculum"
	"flashsale/internal/randhex"
	"flashsale/internal/redisacl"
	"flashsale/internal/testsupport"
	"flashsale/lock/ladder"
)

// Redis with an ACL user and TLS, as docs/operations.md sets it up.

// testCA writes a CA and a server certificate for 127.0.0.1 into dir.
func testCA(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flashsale test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	return write("ca.crt", "CERTIFICATE", caDER), write("server.crt", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// The app works as the app's user of the shipped ACL (internal/redisacl),
// over TLS (rediss://, the CA given by SSL_CERT_FILE), with
// deploy/redis/redis.conf's settings: every variant sells, the audit and a
// reset run, concurrent buyers wait, and Redis's ACL LOG shows no denial.
func TestRedisACLAndTLS(t *testing.T) {
	dir := t.TempDir()
	password, adminPassword := randhex.String(12), randhex.String(12)
	acl, err := redisacl.File(password, adminPassword)
	if err != nil {
		t.Fatal(err)
	}
	aclFile := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(aclFile, acl, 0o600); err != nil {
		t.Fatal(err)
	}
	// redis.conf's directives, minus the file paths this test provides.
	var args []string
	for _, line := range strings.Split(read(t, "deploy/redis/redis.conf"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w := shellWords(line)
		if w[0] == "aclfile" {
			continue
		}
		if len(w) == 1 {
			w = append(w, "")
		}
		args = append(args, "--"+w[0])
		args = append(args, w[1:]...)
	}
	ca, cert, key := testCA(t, dir)
	port := testsupport.FreePort(t)
	args = append(args, "--port", "0", "--tls-port", fmt.Sprint(port), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no", "--aclfile", aclFile, "--dir", dir)
	testsupport.RedisServer(t, args...)

	url := fmt.Sprintf("rediss://flashsale:%s@127.0.0.1:%d/0", password, port)
	a := startApp(t, composeAppEnv(t, map[string]string{"FLASHSALE_REDIS": url, "SSL_CERT_FILE": ca}))
	ps := products(t, a)
	for i, v := range curriculum.Names() {
		sku, want := ps[0].SKU, 201
		if v == ladder.ArticleRedlock {
			// The article's quorum is fixed at 2 whatever the number of
			// nodes: on this one node it never locks, says busy, and leaves
			// its missed try's key for its TTL (it undoes nothing), so it
			// gets an item of its own.
			sku, want = ps[1].SKU, 503
		}
		a.must(t, "POST", "/api/orders", map[string]any{"sku": sku, "qty": 1, "user": fmt.Sprintf("acl%d", i)},
			map[string]string{"X-Lock-Variant": v}, want)
	}
	// Buyers of one SKU queue for its lock: waiters subscribe to its
	// keyspace channel.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			code, b, err := a.do(t, "POST", "/api/orders", map[string]any{"sku": ps[0].SKU, "qty": 1, "user": fmt.Sprintf("q%d", i)},
				map[string]string{"X-Lock-Variant": "redlock"})
			if err != nil || (code != 201 && code != 503) {
				t.Errorf("queued buyer %d: %d %v %s", i, code, err, b)
			}
		})
	}
	wg.Wait()
	a.must(t, "GET", "/api/audit", nil, nil, 200)
	a.must(t, "POST", "/api/admin/reset", nil, nil, 200)

	opt, err := redis.ParseURL(fmt.Sprintf("rediss://%s:%s@127.0.0.1:%d/0", redisacl.AdminUser, adminPassword, port))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pemCA, _ := os.ReadFile(ca)
	pool.AppendCertsFromPEM(pemCA)
	opt.TLSConfig.RootCAs = pool
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entries, err := rdb.ACLLog(ctx, 100).Result()
	if err != nil {
		t.Fatalf("ACL LOG: %v", err)
	}
	for _, e := range entries {
		t.Errorf("Redis refused %s: %s %q (%s)", e.Username, e.Reason, e.Object, e.Context)
	}
	if strings.Contains(a.Output(), "NOPERM") {
		t.Errorf("the app logged a permission error:\n%s", a.Output())
	}
}
