package simbapg

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

func TestRegisteredSchemes(t *testing.T) {
	schemes := simba.BackendSchemes()
	for _, s := range []string{"postgres", "postgresql"} {
		if !slices.Contains(schemes, s) {
			t.Errorf("BackendSchemes() = %v, want %s registered", schemes, s)
		}
	}
	if slices.Contains(schemes, "mysql") {
		t.Errorf("BackendSchemes() = %v: simbapg registers mysql", schemes)
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
		{"postgres://app:" + secret + "@db.invalid:5432/app?sslmode=bogus", "sslmode"},
		{"POSTGRESQL://app:" + secret + "@db.invalid/app?connect_timeout=soon", "connect_timeout"},
		{"postgres://app:" + secret + "@pw@db.invalid/app", "percent-encode"},
		{"postgresql://app:" + secret + "@db.invalid/app#top", "percent-encode"},
		{"postgres://app:" + secret + "%zz@db.invalid/app", "'%'"},
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

// TestOnlyURLErrorsAreInvalidURLs: an error about an option, or a server
// that cannot be reached, is no error of the URL.
func TestOnlyURLErrorsAreInvalidURLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://app@db.invalid/app", Options{TablePrefix: "bad-prefix"})
	if !errors.Is(err, ErrInvalidOptions) || errors.Is(err, simba.ErrInvalidURL) {
		t.Errorf("Open with a bad TablePrefix = %v, want ErrInvalidOptions and not ErrInvalidURL", err)
	}
	_, err = simba.OpenBackend(ctx, "postgres://app:s3cr3t-pw@127.0.0.1:1/app?sslmode=disable&connect_timeout=2")
	if err == nil || errors.Is(err, simba.ErrInvalidURL) || errors.Is(err, ErrInvalidOptions) ||
		!strings.HasPrefix(err.Error(), "simbapg: connect: ") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("OpenBackend of a closed port = %v, want a connect error without the password", err)
	}
}

// TestOpenBackend opens the test server through the registry, with both
// schemes, the way a program importing the package for its side effect
// does.
func TestOpenBackend(t *testing.T) {
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_POSTGRES_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The registry's opener does not migrate: create the tables of the
	// default prefix first, as an operator would. Every client of the test
	// server that uses the default prefix shares them, so they stay.
	pre, err := Open(ctx, raw, Options{Migrate: true, CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := pre.Close(); err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		t.Fatalf("SIMBA_TEST_POSTGRES_URL is not a URL")
	}
	for _, scheme := range []string{"postgres", "postgresql", "PostgreSQL"} {
		b, err := simba.OpenBackend(ctx, scheme+"://"+rest)
		if err != nil {
			t.Fatalf("OpenBackend(%s://...): %v", scheme, err)
		}
		if _, ok := b.(*Backend); !ok {
			t.Errorf("OpenBackend(%s://...) = %T, want *Backend", scheme, b)
		}
		g, err := b.OpenSession(ctx, time.Minute)
		if err != nil {
			t.Errorf("OpenSession on the backend of %s://...: %v", scheme, err)
		} else if err := b.CloseSession(ctx, g.ID); err != nil {
			t.Errorf("CloseSession: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// Open reads the scheme in any case: pgx recognises only a lower-case one
// and would otherwise connect to its defaults instead of the URL's host.
func TestOpenUpperCaseScheme(t *testing.T) {
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_POSTGRES_URL")
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		t.Fatalf("SIMBA_TEST_POSTGRES_URL is not a URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Open(ctx, "POSTGRES://"+rest, Options{Migrate: true, CleanupInterval: -1})
	if err != nil {
		t.Fatalf("Open(POSTGRES://...): %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
