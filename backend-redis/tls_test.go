package simbaredis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/simba-go/simba/core/backendtest"
)

// tlsServer returns the URL of the TLS test server, with its ACL user and
// password (SIMBA_TEST_REDIS_TLS_URL), and the CA that signed its
// certificate (SIMBA_TEST_TLS_CA). Without them the test is skipped,
// unless CI is set.
func tlsServer(t testing.TB) (rawURL string, roots *x509.CertPool) {
	t.Helper()
	rawURL, ca := os.Getenv("SIMBA_TEST_REDIS_TLS_URL"), os.Getenv("SIMBA_TEST_TLS_CA")
	if rawURL == "" || ca == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SIMBA_TEST_REDIS_TLS_URL or SIMBA_TEST_TLS_CA is not set and CI is: run tools/testenv/up redis")
		}
		t.Skip("SIMBA_TEST_REDIS_TLS_URL or SIMBA_TEST_TLS_CA is not set (eval \"$(tools/testenv/up redis)\")")
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatalf("SIMBA_TEST_TLS_CA: %v", err)
	}
	roots = x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("SIMBA_TEST_TLS_CA: no certificate in %s", ca)
	}
	return rawURL, roots
}

// tlsCredentials splits the user information off rawURL.
func tlsCredentials(t testing.TB, rawURL string) (bare, user, password string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("SIMBA_TEST_REDIS_TLS_URL: %v", err)
	}
	password, ok := u.User.Password()
	if !ok || password == "" {
		t.Fatal("SIMBA_TEST_REDIS_TLS_URL has no password")
	}
	user = u.User.Username()
	u.User = nil
	return u.String(), user, password
}

// tlsRawClient is rawClient over TLS with roots.
func tlsRawClient(t testing.TB, rawURL string, roots *x509.CertPool) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("ParseURL: %v", err)
	}
	opts.TLSConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// openTLS opens a Backend with opts on rawURL under prefix, closed when
// the test ends.
func openTLS(t testing.TB, rawURL string, opts Options) *Backend {
	t.Helper()
	b, err := Open(callCtx(t), rawURL, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// TestTLSConformance runs the conformance suite over TLS, as the ACL user
// of the TLS test server: a rediss:// URL with the user and password, and
// Options.TLSConfig with the test CA; passwords in errors are checked on
// rediss:// URLs.
func TestTLSConformance(t *testing.T) {
	rawURL, roots := tlsServer(t)
	prefix := testPrefix()
	raw := tlsRawClient(t, rawURL, roots)
	t.Cleanup(func() { deleteKeys(t, raw, prefix) })
	conf := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	h := harness(raw, prefix, func(t testing.TB) *Backend { return openTLS(t, rawURL, Options{KeyPrefix: prefix, TLSConfig: conf}) })
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	h.Secrets = secretCases("rediss", u.Host, conf)
	backendtest.Run(t, h)
}

// TestTLSForms opens the TLS test server in each form the README gives:
// the credentials in the URL or in Options, TLS from the rediss:// scheme
// or from Options.TLSConfig on a redis:// URL. Each backend wins a lock.
func TestTLSForms(t *testing.T) {
	rawURL, roots := tlsServer(t)
	bare, user, password := tlsCredentials(t, rawURL)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	forms := []struct {
		name string
		url  string
		opts Options
	}{
		{"rediss URL with user information", rawURL, Options{TLSConfig: cfg}},
		{"rediss URL, credentials in Options", bare, Options{TLSConfig: cfg, Username: user, Password: password}},
		{"redis URL, TLS in Options", "redis://" + strings.TrimPrefix(bare, "rediss://"), Options{TLSConfig: cfg, Username: user, Password: password}},
		{"localhost, a name of the certificate", strings.Replace(bare, "127.0.0.1", "localhost", 1), Options{TLSConfig: cfg, Username: user, Password: password}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			prefix := testPrefix()
			t.Cleanup(func() { deleteKeys(t, tlsRawClient(t, rawURL, roots), prefix) })
			f.opts.KeyPrefix = prefix
			b := openTLS(t, f.url, f.opts)
			g, err := b.OpenSession(callCtx(t), 2*time.Second)
			if err != nil {
				t.Fatalf("OpenSession: %v", err)
			}
			mustWin(t, b, g.ID, "tls-form")
		})
	}
}

// TestTLSOpenFailures checks that a wrong CA, a wrong host name and a
// wrong password each fail Open with one line that names the problem and
// shows no password.
func TestTLSOpenFailures(t *testing.T) {
	otherRoots, _ := backendtest.OtherCA(t)
	rawURL, roots := tlsServer(t)
	bare, user, password := tlsCredentials(t, rawURL)
	wrongURL := strings.Replace(rawURL, ":"+password+"@", ":"+backendtest.Secret+"@", 1)
	cases := []struct {
		name string
		url  string
		opts Options
		want []string // in the message, in any case
		is   error
	}{
		{"system roots", rawURL, Options{}, []string{"certificate signed by unknown authority"}, nil},
		{"wrong CA", rawURL, Options{TLSConfig: &tls.Config{RootCAs: otherRoots}}, []string{"certificate signed by unknown authority"}, nil},
		{"wrong host name", rawURL, Options{TLSConfig: &tls.Config{RootCAs: roots, ServerName: "wrong.example"}},
			[]string{"certificate is valid for", "not wrong.example"}, nil},
		{"wrong password in the URL", wrongURL, Options{TLSConfig: &tls.Config{RootCAs: roots}}, []string{"WRONGPASS"}, ErrAuth},
		{"wrong password in Options", bare, Options{TLSConfig: &tls.Config{RootCAs: roots}, Username: user, Password: backendtest.Secret},
			[]string{"WRONGPASS"}, ErrAuth},
		{"no password", bare, Options{TLSConfig: &tls.Config{RootCAs: roots}}, []string{"NOAUTH"}, ErrAuth},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Logger = quiet
			var got error
			backendtest.OpenFailsHiding(t, "Open", 5*time.Second, func(ctx context.Context) (io.Closer, error) {
				b, err := Open(ctx, c.url, c.opts)
				got = err
				if err != nil {
					return nil, err
				}
				return b, nil
			}, password, backendtest.Secret)
			backendtest.OneClearLine(t, got, c.want...)
			if c.is != nil && !errors.Is(got, c.is) {
				t.Errorf("Open: %v, want an error matching %v", got, c.is)
			}
		})
	}
}
