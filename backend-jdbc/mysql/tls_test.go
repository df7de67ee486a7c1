package simbamysql

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	"github.com/simba-go/simba/core/backendtest"
)

const tlsEnv = "SIMBA_TEST_MYSQL_TLS_URL"

// tlsServer returns the DSN of the TLS test server (its tls parameter
// names the configuration "custom") with its password, the password,
// and the CA; "custom" is registered with that CA.
func tlsServer(t testing.TB) (dsn, password string, roots *x509.CertPool) {
	t.Helper()
	dsn, _, roots = backendtest.TLSServer(t, tlsEnv)
	if err := mysql.RegisterTLSConfig("custom", &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatal(err)
	}
	cfg := parseDSN(t, dsn)
	if cfg.Passwd == "" {
		t.Fatalf("%s has no password", tlsEnv)
	}
	return dsn, cfg.Passwd, roots
}

// tlsURL returns the mysql:// URL of dsn, which keeps the DSN's tls
// parameter, kept apart from the other parameters by the driver.
func tlsURL(t testing.TB, dsn string) string {
	t.Helper()
	cfg := parseDSN(t, dsn)
	user := cfg.User
	if cfg.Passwd != "" {
		user += ":" + cfg.Passwd
	}
	q := url.Values{}
	for k, v := range cfg.Params {
		q.Set(k, v)
	}
	if cfg.TLSConfig != "" {
		q.Set("tls", cfg.TLSConfig)
	}
	u := fmt.Sprintf("mysql://%s@%s/%s", user, cfg.Addr, cfg.DBName)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// dsnWith returns dsn changed by edit.
func dsnWith(t testing.TB, dsn string, edit func(*mysql.Config)) string {
	t.Helper()
	cfg := parseDSN(t, dsn)
	edit(cfg)
	return cfg.FormatDSN()
}

// TestTLSForms opens the TLS test server in each form the README gives: a
// DSN or a mysql:// URL with tls=custom (a configuration registered with
// mysql.RegisterTLSConfig), and Options.TLS with the password in
// Options.Password.
func TestTLSForms(t *testing.T) {
	dsn, password, roots := tlsServer(t)
	admin := newDB(t, dsn, 1)
	bare := dsnWith(t, dsn, func(c *mysql.Config) { c.Passwd, c.TLSConfig, c.TLS = "", "", nil })
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	forms := []struct {
		name string
		src  string
		opts Options
	}{
		{"DSN with tls=custom", dsn, Options{}},
		{"URL with tls=custom", tlsURL(t, dsn), Options{}},
		{"DSN, Options.TLS and Options.Password", bare, Options{TLS: cfg, Password: password}},
		{"URL, Options.TLS and Options.Password", tlsURL(t, bare), Options{TLS: cfg, Password: password}},
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
					if _, err := admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
						t.Logf("drop %s: %v", name, err)
					}
				}
			})
			// The server requires secure transport: an Open that
			// succeeds went over TLS.
			b, err := Open(ctx, f.src, f.opts)
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
	dsn, password, roots := tlsServer(t)
	otherRoots, _ := backendtest.OtherCA(t)
	if err := mysql.RegisterTLSConfig("other-ca", &tls.Config{RootCAs: otherRoots}); err != nil {
		t.Fatal(err)
	}
	bare := dsnWith(t, dsn, func(c *mysql.Config) { c.Passwd, c.TLSConfig, c.TLS = "", "", nil })
	tlsParam := func(name string) string {
		return dsnWith(t, dsn, func(c *mysql.Config) { c.TLSConfig, c.TLS = name, nil })
	}
	wrongPassword := dsnWith(t, dsn, func(c *mysql.Config) { c.Passwd = backendtest.Secret })
	unknownCA := []string{"tls", "certificate signed by unknown authority"}
	denied := []string{"access denied", "simba"}
	fails := func(name, src string, opts Options, want ...string) backendtest.TLSFailure {
		// Without Migrate, an Open that got through would still fail, on
		// the missing tables, and create nothing.
		opts.TablePrefix = "tls_probe_"
		return backendtest.TLSFailure{Name: name, Want: want,
			Open: func(ctx context.Context) (io.Closer, error) {
				b, err := Open(ctx, src, opts)
				if err != nil {
					return nil, err
				}
				return b, nil
			}}
	}
	backendtest.RunTLSFailures(t, []backendtest.TLSFailure{
		fails("wrong CA in the DSN", tlsParam("other-ca"), Options{}, unknownCA...),
		fails("wrong CA in the URL", tlsURL(t, tlsParam("other-ca")), Options{}, unknownCA...),
		fails("system roots", tlsParam("true"), Options{}, unknownCA...),
		fails("wrong CA in Options.TLS", bare, Options{Password: password, TLS: &tls.Config{RootCAs: otherRoots}}, unknownCA...),
		fails("wrong host name", bare, Options{Password: password, TLS: &tls.Config{RootCAs: roots, ServerName: "wrong.example"}},
			"certificate is valid for", "not wrong.example"),
		fails("wrong password in the DSN", wrongPassword, Options{}, denied...),
		fails("wrong password in the URL", tlsURL(t, wrongPassword), Options{}, denied...),
		fails("wrong password in Options", dsn, Options{Password: backendtest.Secret}, denied...),
		// MariaDB does not say why: the user requires TLS.
		fails("no TLS", bare, Options{Password: password}, denied...),
	}, password, backendtest.Secret)
}
