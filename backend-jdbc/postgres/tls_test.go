package simbapg

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	"github.com/simba-go/simba/core/backendtest"
)

const tlsEnv = "SIMBA_TEST_POSTGRES_TLS_URL"

// tlsURL returns the TLS test server's URL without its password, the
// password, the CA's file and pool.
func tlsURL(t testing.TB) (u *url.URL, password, caFile string, roots *x509.CertPool) {
	t.Helper()
	raw, caFile, roots := backendtest.TLSServer(t, tlsEnv)
	u = parseURL(t, raw)
	password, ok := u.User.Password()
	if !ok || password == "" {
		t.Fatalf("%s has no password", tlsEnv)
	}
	u.User = url.User(u.User.Username())
	return u, password, caFile, roots
}

// withQuery returns u with its query parameters set to kv (pairs).
func withQuery(u *url.URL, kv ...string) string {
	c := *u
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	c.RawQuery = q.Encode()
	return c.String()
}

// withPassword returns u with password in its user information.
func withPassword(u *url.URL, password string) *url.URL {
	c := *u
	c.User = url.UserPassword(u.User.Username(), password)
	return &c
}

// openTLS is Open for a case that must fail: without Migrate, an Open
// that got through would still fail, on the missing tables, and create
// nothing.
func openTLS(ctx context.Context, rawURL string, opts Options) (io.Closer, error) {
	opts.TablePrefix = "tls_probe_"
	b, err := Open(ctx, rawURL, opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// TestTLSForms opens the TLS test server in each form the README gives:
// verify-full with sslrootcert in the URL, the password in the URL or in
// Options.Password, and Options.TLS in place of the URL's sslmode.
func TestTLSForms(t *testing.T) {
	u, password, caFile, roots := tlsURL(t)
	verify := []string{"sslmode", "verify-full", "sslrootcert", caFile}
	admin := newPool(t, withQuery(withPassword(u, password), verify...), 1)
	forms := []struct {
		name string
		url  string
		opts Options
	}{
		{"password in the URL", withQuery(withPassword(u, password), verify...), Options{}},
		{"password in Options", withQuery(u, verify...), Options{Password: password}},
		{"Options.TLS", withQuery(u), Options{Password: password, TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}},
		{"Options.TLS over sslmode=disable", withQuery(u, "sslmode", "disable"), Options{Password: password, TLS: &tls.Config{RootCAs: roots}}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var r [5]byte
			_, _ = rand.Read(r[:])
			f.opts.TablePrefix = "t" + hex.EncodeToString(r[:]) + "_"
			f.opts.Migrate = true
			t.Cleanup(func() {
				for _, name := range sqlcore.NewTables(f.opts.TablePrefix).All() {
					if _, err := admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
						t.Logf("drop %s: %v", name, err)
					}
				}
			})
			// The server refuses simba without TLS: an Open that
			// succeeds went over TLS.
			b, err := Open(ctx, f.url, f.opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer func() { _ = b.Close() }()
			g, err := b.OpenSession(ctx, 2*time.Second)
			if err != nil {
				t.Fatalf("OpenSession: %v", err)
			}
			if r, err := b.Acquire(ctx, g.ID, "tls-form"); err != nil || !r.Won {
				t.Fatalf("Acquire = %+v, %v; want won", r, err)
			}
		})
	}
}

// TestTLSOpenFailures checks that a wrong CA, a wrong host name, a wrong
// password and no TLS each fail Open with one line that names the problem
// and shows no password.
func TestTLSOpenFailures(t *testing.T) {
	u, password, caFile, roots := tlsURL(t)
	otherRoots, otherFile := backendtest.OtherCA(t)
	verify := []string{"sslmode", "verify-full", "sslrootcert", caFile}
	unknownCA := []string{"tls", "certificate signed by unknown authority"}
	fails := func(name, rawURL string, opts Options, want ...string) backendtest.TLSFailure {
		return backendtest.TLSFailure{Name: name, Want: want,
			Open: func(ctx context.Context) (io.Closer, error) { return openTLS(ctx, rawURL, opts) }}
	}
	backendtest.RunTLSFailures(t, []backendtest.TLSFailure{
		fails("wrong CA in the URL", withQuery(u, "sslmode", "verify-full", "sslrootcert", otherFile), Options{Password: password}, unknownCA...),
		fails("system roots", withQuery(u, "sslmode", "verify-full"), Options{Password: password}, unknownCA...),
		fails("wrong CA in Options.TLS", withQuery(u), Options{Password: password, TLS: &tls.Config{RootCAs: otherRoots}}, unknownCA...),
		fails("wrong host name", withQuery(u), Options{Password: password, TLS: &tls.Config{RootCAs: roots, ServerName: "wrong.example"}},
			"certificate is valid for", "not wrong.example"),
		fails("wrong password in the URL", withQuery(withPassword(u, backendtest.Secret), verify...), Options{},
			"password authentication failed", "simba"),
		fails("wrong password in Options", withQuery(u, verify...), Options{Password: backendtest.Secret},
			"password authentication failed", "simba"),
		fails("no TLS", withQuery(u, "sslmode", "disable"), Options{Password: password},
			"pg_hba.conf rejects connection", "no encryption"),
	}, password, backendtest.Secret)
}
