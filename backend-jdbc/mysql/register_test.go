package simbamysql

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

func TestRegisteredSchemes(t *testing.T) {
	schemes := simba.BackendSchemes()
	if !slices.Contains(schemes, "mysql") {
		t.Errorf("BackendSchemes() = %v, want mysql registered", schemes)
	}
	if slices.Contains(schemes, "postgres") {
		t.Errorf("BackendSchemes() = %v: simbamysql registers postgres", schemes)
	}
}

// TestOpenBackendURLErrors: a URL that cannot be used as written fails
// before any dial with an error matching both simba.ErrInvalidURL and
// ErrInvalidOptions, without its password.
func TestOpenBackendURLErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range []struct{ url, want string }{
		{"mysql://app:" + secret + "@db.invalid:3306/", "no database name"},
		{"MYSQL://app:" + secret + "@db.invalid/app?tls=nosuch", "query parameters"},
		{"mysql://app:" + secret + "@pw@db.invalid/app?x=@", "percent-encode"},
		{"mysql://app:" + secret + "@db.invalid/app#top", "percent-encode"},
		{"mysql://app:" + secret + "%zz@db.invalid/app", "'%'"},
		{"mysql://a%3Ab:" + secret + "@db.invalid/app", "user name contains ':'"},
	} {
		b, err := simba.OpenBackend(ctx, c.url)
		if err == nil {
			_ = b.Close()
			t.Errorf("OpenBackend(%q) succeeded", strings.ReplaceAll(c.url, secret, "***"))
			continue
		}
		if !errors.Is(err, simba.ErrInvalidURL) || !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenBackend(%q) = %v, want ErrInvalidURL and ErrInvalidOptions saying %q",
				strings.ReplaceAll(c.url, secret, "***"), err, c.want)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the error of an invalid URL shows the password: %v", err)
		}
	}
}

// TestOnlyURLErrorsAreInvalidURLs: an invalid DSN given to Open is an
// invalid URL too; an error about an option, or a server that cannot be
// reached, is not.
func TestOnlyURLErrorsAreInvalidURLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Open(ctx, "app:s3cr3t-pw@tcp(db.invalid:3306)/", Options{})
	if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, simba.ErrInvalidURL) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Open of a DSN without a database = %v, want ErrInvalidOptions and ErrInvalidURL", err)
	}
	_, err = Open(ctx, "mysql://app@db.invalid/app", Options{TablePrefix: "bad-prefix"})
	if !errors.Is(err, ErrInvalidOptions) || errors.Is(err, simba.ErrInvalidURL) {
		t.Errorf("Open with a bad TablePrefix = %v, want ErrInvalidOptions and not ErrInvalidURL", err)
	}
	_, err = simba.OpenBackend(ctx, "mysql://app:s3cr3t-pw@127.0.0.1:1/app?timeout=2s")
	if err == nil || errors.Is(err, simba.ErrInvalidURL) || errors.Is(err, ErrInvalidOptions) ||
		!strings.HasPrefix(err.Error(), "simbamysql: connect: ") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("OpenBackend of a closed port = %v, want a connect error without the password", err)
	}
}

// mysqlURL returns the mysql:// URL of the server that dsn, a
// go-sql-driver DSN over TCP, names: the registry opens URLs only.
func mysqlURL(t *testing.T, dsn string) string {
	t.Helper()
	cfg := parseDSN(t, dsn)
	if cfg.Net != "tcp" {
		t.Skipf("SIMBA_TEST_MYSQL_URL reaches the server over %s: a mysql:// URL names a TCP address only", cfg.Net)
	}
	u := url.URL{Scheme: "mysql", User: url.User(cfg.User), Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	}
	if cfg.TLSConfig != "" {
		u.RawQuery = url.Values{"tls": {cfg.TLSConfig}}.Encode()
	}
	return u.String()
}

// TestOpenBackend opens the test server through the registry, the way a
// program importing the package for its side effect does, from the
// mysql:// form of the test server's DSN.
func TestOpenBackend(t *testing.T) {
	dsn := backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL")
	raw := mysqlURL(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The registry's opener does not migrate: create the tables of the
	// default prefix first, as an operator would. Every client of the test
	// server that uses the default prefix shares them, so they stay.
	pre, err := Open(ctx, dsn, Options{Migrate: true, CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := pre.Close(); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{raw, "MySQL" + strings.TrimPrefix(raw, "mysql")} {
		b, err := simba.OpenBackend(ctx, u)
		if err != nil {
			t.Fatalf("OpenBackend(mysql://...): %v", err)
		}
		if _, ok := b.(*Backend); !ok {
			t.Errorf("OpenBackend(mysql://...) = %T, want *Backend", b)
		}
		g, err := b.OpenSession(ctx, time.Minute)
		if err != nil {
			t.Errorf("OpenSession on the backend of mysql://...: %v", err)
		} else if err := b.CloseSession(ctx, g.ID); err != nil {
			t.Errorf("CloseSession: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	// A DSN has no scheme: the registry refuses it without quoting it.
	_, err = simba.OpenBackend(ctx, dsn)
	var se *simba.SchemeError
	if !errors.As(err, &se) || !errors.Is(err, simba.ErrInvalidURL) {
		t.Errorf("OpenBackend of a DSN = %v, want a *simba.SchemeError matching ErrInvalidURL", err)
	}
}
