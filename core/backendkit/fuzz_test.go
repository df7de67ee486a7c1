package backendkit_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/simba-go/simba/core/backendkit"
)

// FuzzMaskText: whatever the text and the secrets, no maskable secret
// survives MaskText, and a text without any is returned as it is.
func FuzzMaskText(f *testing.F) {
	f.Add("dial tcp 127.0.0.1:1: refused Zq7SecretVw3Ky", "Zq7SecretVw3Ky", "1")
	f.Add("secret1ab", "secret1", "xxxxxab")
	f.Add("p%40ss%2Fw p@ss/w", "p@ss/w", "")
	f.Add("xxxxxxxxxxx", "xxxxxx", "xxxxxxx")
	f.Fuzz(func(t *testing.T, text, a, b string) {
		secrets := []string{a, b}
		got := backendkit.MaskText(text, secrets)
		for _, s := range secrets {
			if backendkit.Maskable(s) && strings.Contains(got, s) {
				t.Fatalf("MaskText(%q, %q) = %q shows %q", text, secrets, got, s)
			}
		}
		if !strings.Contains(text, a) && !strings.Contains(text, b) && !containsForm(text, a) && !containsForm(text, b) && got != text {
			t.Fatalf("MaskText(%q, %q) = %q changed a text holding no secret", text, secrets, got)
		}
	})
}

func containsForm(text, s string) bool {
	for _, f := range []string{url.QueryEscape(s), url.PathEscape(s), url.User(s).String()} {
		if strings.Contains(text, f) {
			return true
		}
	}
	return false
}

// FuzzRedactURL builds a URL from a password and query pairs: the
// printed URL shows no maskable value of a credential (nor the password),
// every pair that holds no credential is printed as written, in its place,
// and the URL's secrets include every credential value.
func FuzzRedactURL(f *testing.F) {
	f.Add("Zq7SecretVw3Ky", "password", "Zq7SecretVw3Ky", "dial_timeout", "1s")
	f.Add("", "x_auth", "1", "allowCleartextPasswords", "1")
	f.Add("p@ss", "require_auth", "md5", "sentinel_password", "a;b=c")
	f.Add("pw", "a=1;token", "tok", "b", "%zz")
	f.Fuzz(func(t *testing.T, password, k1, v1, k2, v2 string) {
		u := &url.URL{Scheme: "redis", Host: "127.0.0.1:1", Path: "/0"}
		if password != "" {
			u.User = url.UserPassword("u", password)
		}
		pairs := []string{k1 + "=" + v1, k2 + "=" + v2}
		for _, p := range pairs {
			if strings.ContainsAny(p, "&#") {
				t.Skip("a pair holds a separator of the query")
			}
		}
		u.RawQuery = strings.Join(pairs, "&")
		parsed, err := url.Parse(u.String())
		if err != nil || parsed.RawQuery != u.RawQuery {
			t.Skip("not a URL that parses back")
		}
		got := backendkit.RedactURL(parsed)
		head, query, _ := strings.Cut(got, "?")
		if password != "" && !strings.HasSuffix(head, "u:xxxxx@127.0.0.1:1/0") {
			t.Fatalf("RedactURL(%q) = %q: the password is not masked", u, got)
		}
		printed := strings.Split(query, "&")
		if len(printed) != len(pairs) {
			t.Fatalf("RedactURL(%q) = %q: %d pairs, want %d", u, got, len(printed), len(pairs))
		}
		secrets := backendkit.URLSecrets(parsed)
		for i, p := range pairs {
			want := p
			if at := credentialAt(p); at >= 0 {
				key, value, _ := strings.Cut(p[at:], "=")
				if value != "" {
					want = p[:at] + key + "=" + backendkit.Mask
					if !slices.Contains(secrets, value) {
						t.Fatalf("URLSecrets(%q) = %q lacks %q", u, secrets, value)
					}
				}
			}
			if printed[i] != want {
				t.Fatalf("RedactURL(%q) = %q: pair %q printed as %q, want %q", u, got, p, printed[i], want)
			}
		}
	})
}

// credentialAt returns the offset in a query pair of its first part,
// split at ';', that names a credential before an '=', or -1.
func credentialAt(pair string) int {
	off := 0
	for _, part := range strings.Split(pair, ";") {
		if key, _, ok := strings.Cut(part, "="); ok {
			if k, err := url.QueryUnescape(key); err == nil {
				key = k
			}
			if backendkit.IsCredentialParam(key) {
				return off
			}
		}
		off += len(part) + 1
	}
	return -1
}

// FuzzCheckIdentity: CheckIdentity accepts exactly the identities of 1 to
// MaxIdentity bytes of printable UTF-8, and its error quotes nothing of
// the identity.
func FuzzCheckIdentity(f *testing.F) {
	f.Add("billing-7 (eu-west)")
	f.Add("a\nb")
	f.Add("ab\xff")
	f.Add(strings.Repeat("é", 129))
	f.Fuzz(func(t *testing.T, id string) {
		err := backendkit.CheckIdentity(id)
		printable := utf8.ValidString(id) && !strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) })
		if want := id != "" && len(id) <= backendkit.MaxIdentity && printable; (err == nil) != want {
			t.Fatalf("CheckIdentity(%q) = %v, want accepted %v", id, err, want)
		}
		if err != nil && len(id) >= 6 && strings.Contains(err.Error(), id) {
			t.Fatalf("CheckIdentity(%q) = %v quotes the identity", id, err)
		}
	})
}

// FuzzParseURL: whatever the text, ParseURL's error is one of its own
// words, never a part of the URL, and what it accepts url.Parse parses to
// the same URL.
func FuzzParseURL(f *testing.F) {
	f.Add("redis://app:S3cr%2Fet@h:6379/0")
	f.Add("redis://app:S3cr/et@h:6379/0")
	f.Add("postgres://u:p%zz@h/d#x")
	f.Add("redis://[::1%zz]:1")
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := backendkit.ParseURL(raw)
		if err != nil {
			for _, words := range []string{
				"a '%' not followed by two hexadecimal digits",
				"an invalid character in the host",
				"not a valid URL (a port that is not a number from 1 to 65535, or an unencoded '/', '?' or '#' in the password)",
				"not a valid URL",
				"cannot tell its user information from the rest",
			} {
				if err.Error() == words {
					return
				}
			}
			t.Fatalf("ParseURL(%q) = %v: not one of its own messages", raw, err)
		}
		want, perr := url.Parse(raw)
		if perr != nil || want.String() != u.String() {
			t.Fatalf("ParseURL(%q) = %v, url.Parse = %v, %v", raw, u, want, perr)
		}
		if u.Opaque != "" || u.Fragment != "" || strings.Contains(u.RawQuery, "@") {
			t.Fatalf("ParseURL(%q) accepted a URL whose user information may have moved: %#v", raw, u)
		}
	})
}
