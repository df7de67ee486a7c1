package sqltest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/core/backendtest"
)

// Secrets describes the URLs of a test server for the tests of errors that
// must not show a password.
type Secrets struct {
	Schemes []string // the schemes Open takes
	Host    string   // host:port of the server
	DB      string   // the path, and query if any, of a usable URL
	Invalid string   // a query that makes the URL unusable
	DSN     bool     // Open takes a go-sql-driver/mysql DSN too

	// HoldsConfig reports whether err wraps a driver value that keeps the
	// configuration, and so the password; nil when the driver has none.
	HoldsConfig func(err error) bool
}

// secretForm is one way of giving Open a password: in the URL (raw or
// percent-encoded), in Options.Password, or in a DSN.
type secretForm struct {
	name    string
	url     func(scheme, pw, host, rest string) string
	options bool
}

var secretForms = []secretForm{
	{name: "raw in URL", url: func(scheme, pw, host, rest string) string {
		return scheme + "://simba_no_such_user:" + pw + "@" + host + rest
	}},
	{name: "encoded in URL", url: func(scheme, pw, host, rest string) string {
		return scheme + "://" + url.UserPassword("simba_no_such_user", pw).String() + "@" + host + rest
	}},
	{name: "in Options", options: true, url: func(scheme, _, host, rest string) string {
		return scheme + "://simba_no_such_user@" + host + rest
	}},
}

var dsnForm = secretForm{name: "DSN", url: func(_, pw, host, rest string) string {
	return "simba_no_such_user:" + pw + "@tcp(" + host + ")" + rest
}}

// secretCases are the cases of the conformance check SecretsInErrors:
// for each scheme, a URL that cannot be used, a server that cannot be
// reached and credentials the server refuses, with the password in each
// form; the error is the package's (but for a raw password in a URL,
// which may be misread as another part of it) and wraps no driver value
// that keeps the password.
func (f *fixture) secretCases(t testing.TB) []backendtest.SecretCase {
	srv := f.h.Secrets(t, f.raw)
	pkg := f.h.Pkg
	forms := secretForms
	if srv.DSN {
		forms = append(forms[:len(forms):len(forms)], dsnForm)
	}
	invalid := srv.DB + srv.Invalid
	if strings.Contains(srv.DB, "?") {
		invalid = srv.DB + strings.Replace(srv.Invalid, "?", "&", 1)
	}
	connect := func(err error) bool { return strings.HasPrefix(err.Error(), pkg.Name+": connect: ") }
	paths := []struct {
		name, host, rest string
		want             func(error) bool
	}{
		{"invalid URL", srv.Host, invalid, func(err error) bool { return errors.Is(err, pkg.ErrInvalidOptions) }},
		{"unreachable", "127.0.0.1:1", srv.DB, connect},
		{"wrong credentials", srv.Host, srv.DB, connect},
	}
	var cases []backendtest.SecretCase
	for _, scheme := range srv.Schemes {
		for _, p := range paths {
			for _, form := range forms {
				cases = append(cases, backendtest.SecretCase{
					Name: scheme + "/" + p.name + "/" + form.name,
					Open: func(ctx context.Context, pw string, log *slog.Logger) (io.Closer, error) {
						o := OpenOptions{Options: f.options()}
						o.Logger = log
						if form.options {
							o.Password = pw
						}
						return f.h.Open(ctx, form.url(scheme, pw, p.host, p.rest), o)
					},
					Want: func(err error) bool {
						return (srv.HoldsConfig == nil || !srv.HoldsConfig(err)) && (form.name == "raw in URL" || p.want(err))
					},
					Within: 5 * time.Second,
				})
			}
		}
	}
	return cases
}
