package backendkit

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestCheckScheme(t *testing.T) {
	for _, c := range []struct {
		give string
		want string // the scheme, or the error when it starts with "!"
	}{
		{give: "memory://a", want: "memory"},
		{give: "MeMoRy://a", want: "memory"},
		{give: "postgresql://u:s3cr3t@h/d", want: "postgresql"},
		{give: "", want: "!the URL is empty: want X://"},
		{give: "  ", want: "!the URL is only spaces: want X://"},
		{give: "memory://a ", want: "!the URL starts or ends with a space: want X://"},
		{give: "memory:a", want: `!no "//" after "memory:": want X://`},
		{give: "Postgres:/s3cr3t@h", want: `!no "//" after "postgres:": want X://`},
		{give: "redis:s3cr3t", want: "!no scheme: want X://"},
		{give: "u:s3cr3t@h://x", want: "!no scheme: want X://"},
		{give: "s3cr3t", want: "!no scheme: want X://"},
		{give: "Redis://u:s3cr3t@h", want: `!scheme "redis": want X://`},
	} {
		got, err := CheckScheme(c.give, "X://", "memory", "postgres", "postgresql")
		if err != nil {
			got = "!" + err.Error()
		}
		if got != c.want {
			t.Errorf("CheckScheme(%q) = %q, want %q", c.give, got, c.want)
		}
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("CheckScheme(%q) = %q quotes the URL", c.give, got)
		}
	}
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		give string
		want string // in the error; "" when accepted
	}{
		{give: "redis://u:s3cr3t@h:6379/0"},
		{give: "redis://u:s3%40cr%2F3t@h/0?dial_timeout=1s"},
		{give: "redis://h"},
		{give: "redis://u:s3cr3t%zz@h/0", want: "a '%' not followed by two hexadecimal digits"},
		{give: "redis://u:s3cr3t@h\x01/0", want: "not a valid URL"},
		{give: "redis://u:s3/cr3t@h/0", want: "a port that is not a number"},
		{give: "redis://[::1%zz]:1", want: "a '%' not followed"},
		{give: "redis://u:s3cr3t@h/0#frag", want: "cannot tell its user information from the rest"},
		{give: "redis://u:s3cr#3t@h/0", want: "or an unencoded '/', '?' or '#' in the password"},
		{give: "redis://u@h/0?s3cr3t#", want: "cannot tell its user information"},
		{give: "redis://us3r:pw@h:1/0?x=@", want: "cannot tell its user information"},
		{give: "redis://u:s3cr/3t@h/0", want: "not a valid URL"},
		{give: "redis://h/0?password=s3@cr3t", want: "cannot tell its user information"},
		{give: "redis:u:s3cr3t@h/0", want: "cannot tell its user information"},
	} {
		u, err := ParseURL(c.give)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("ParseURL(%q): %v", c.give, err)
		case c.want == "" && u == nil:
			t.Errorf("ParseURL(%q) returned no URL", c.give)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("ParseURL(%q) = %v, want an error saying %q", c.give, err, c.want)
		case err != nil && strings.Contains(err.Error(), "s3"):
			t.Errorf("ParseURL(%q): the error quotes the URL: %v", c.give, err)
		}
	}
}

func TestRedacted(t *testing.T) {
	if got := Redacted(""); got != `""` {
		t.Errorf(`Redacted("") = %s, want ""`, got)
	}
	if got := Redacted("s3cr3t"); got != "redacted" {
		t.Errorf("Redacted(s3cr3t) = %s, want redacted", got)
	}
}

type (
	testBackend interface{ Close() error }
	testOpener  func(ctx context.Context, rawURL string) (testBackend, error)
	conn        struct{ url string }
)

func (*conn) Close() error { return nil }

// TestRegister: every scheme gets the opener; a failed open returns a
// nil interface, not a nil *conn in one; a type that is no backend panics
// at registration.
func TestRegister(t *testing.T) {
	openers := map[string]testOpener{}
	register := func(scheme string, open testOpener) { openers[scheme] = open }
	errRefused := errors.New("refused")
	Register(register, func(_ context.Context, rawURL string) (*conn, error) {
		if strings.HasPrefix(rawURL, "bad") {
			return nil, errRefused
		}
		return &conn{url: rawURL}, nil
	}, "a", "b")
	if len(openers) != 2 || openers["a"] == nil || openers["b"] == nil {
		t.Fatalf("registered %v, want a and b", openers)
	}
	b, err := openers["b"](t.Context(), "b://x")
	if c, ok := b.(*conn); err != nil || !ok || c.url != "b://x" {
		t.Errorf("open(b://x) = %#v, %v", b, err)
	}
	b, err = openers["a"](t.Context(), "bad://x")
	if b != nil || !errors.Is(err, errRefused) {
		t.Errorf("open(bad://x) = %#v, %v; want a nil backend and the opener's error", b, err)
	}

	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "string does not implement backendkit.testBackend") {
			t.Errorf("Register of a type that is no backend: recovered %v", r)
		}
	}()
	Register(register, func(context.Context, string) (string, error) { return "", nil }, "c")
	t.Error("Register of a type that is no backend returned")
}

// TestSchemes: every scheme of the table has a package of this project and
// a form that starts with the scheme.
func TestSchemes(t *testing.T) {
	for name, s := range schemes {
		if !ValidScheme(name) || name != strings.ToLower(name) {
			t.Errorf("scheme %q: not a lower-case scheme", name)
		}
		if !strings.HasPrefix(s.pkg, "github.com/simba-go/simba/") || SchemePackage(strings.ToUpper(name)) != s.pkg {
			t.Errorf("scheme %q: package %q", name, s.pkg)
		}
		if !strings.HasPrefix(s.form, name+"://") || URLForm(strings.ToUpper(name)) != s.form {
			t.Errorf("scheme %q: form %q", name, s.form)
		}
	}
}
