package sqltest

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"
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

var secretPasswords = []string{
	"Qz9#Jx8Wv7",
	"Qz9/Jx8Wv7",
	"Qz9?Jx8Wv7",
	"Qz9@Jx8Wv7",
	"Qz9%Jx8Wv7",
	"Qz9%41Jx8Wv7",
	"Qz9:Jx8Wv7",
	"Qz9://Jx8Wv7",
	"6380/Qz9Jx8",
	"6380#Qz9Jx8",
	"6380?Qz9Jx8",
	"Ab1#Cd2/Ef3?Gh4@Ij5%Kl6:Mn7",
}

// leakedPart returns the longest part of secret (3 bytes or more, with a
// letter in it) that text contains, or "" when there is none.
func leakedPart(text, secret string) string {
	for n := len(secret); n >= 3; n-- {
		for i := 0; i+n <= len(secret); i++ {
			part := secret[i : i+n]
			if !strings.ContainsFunc(part, unicode.IsLetter) {
				continue
			}
			if strings.Contains(text, part) {
				return part
			}
		}
	}
	return ""
}

// testOpenErrorsHidePasswords: whatever the password holds and however it
// is given (raw or percent-encoded in a URL, in a DSN, or in
// Options.Password), no error of Open shows any part of it, nor wraps a
// driver value that keeps it: not for a URL that cannot be used, a server
// that cannot be reached, or credentials the server refuses.
func testOpenErrorsHidePasswords(t *testing.T, f *fixture) {
	srv := f.h.Secrets(t, f.raw)
	pkg := f.h.Pkg
	forms := []struct {
		name string
		url  func(scheme, pw, host, rest string) string
		pass bool // the password is in Options.Password
	}{
		{name: "raw in URL", url: func(scheme, pw, host, rest string) string {
			return scheme + "://simba_no_such_user:" + pw + "@" + host + rest
		}},
		{name: "encoded in URL", url: func(scheme, pw, host, rest string) string {
			return scheme + "://" + url.UserPassword("simba_no_such_user", pw).String() + "@" + host + rest
		}},
		{name: "in Options", url: func(scheme, _, host, rest string) string {
			return scheme + "://simba_no_such_user@" + host + rest
		}, pass: true},
	}
	if srv.DSN {
		forms = append(forms, struct {
			name string
			url  func(scheme, pw, host, rest string) string
			pass bool
		}{name: "DSN", url: func(_, pw, host, rest string) string {
			return "simba_no_such_user:" + pw + "@tcp(" + host + ")" + rest
		}})
	}
	invalid := srv.DB + srv.Invalid
	if strings.Contains(srv.DB, "?") {
		invalid = srv.DB + strings.Replace(srv.Invalid, "?", "&", 1)
	}
	connect := func(err error) bool { return strings.HasPrefix(err.Error(), pkg.Name+": connect: ") }
	paths := []struct {
		name, host, rest string
		want             func(error) bool // for a usable URL
	}{
		{name: "invalid URL", host: srv.Host, rest: invalid,
			want: func(err error) bool { return errors.Is(err, pkg.ErrInvalidOptions) }},
		{name: "unreachable", host: "127.0.0.1:1", rest: srv.DB, want: connect},
		{name: "wrong credentials", host: srv.Host, rest: srv.DB, want: connect},
	}
	for _, scheme := range srv.Schemes {
		for _, p := range paths {
			for _, form := range forms {
				t.Run(scheme+"/"+p.name+"/"+form.name, func(t *testing.T) {
					for _, pw := range secretPasswords {
						var opts OpenOptions
						if form.pass {
							opts.Password = pw
						}
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						b, err := f.h.Open(ctx, form.url(scheme, pw, p.host, p.rest), opts)
						cancel()
						if err == nil {
							_ = b.Close()
							t.Errorf("password %q: Open succeeded", pw)
							continue
						}
						if part := leakedPart(err.Error(), pw); part != "" {
							t.Errorf("the error shows %q of the password %q: %v", part, pw, err)
						}
						if srv.HoldsConfig != nil && srv.HoldsConfig(err) {
							t.Errorf("the error wraps a driver value that holds the password: %v", err)
						}
						// A raw password in a URL is refused as a URL, or
						// for ':' and '@' read as the path's own error:
						// nothing more to check.
						if form.name != "raw in URL" && !p.want(err) {
							t.Errorf("password %q: unexpected error %v", pw, err)
						}
					}
				})
			}
		}
	}
}
