package backendkit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// PercentEncodeHint tells how to write a user name or password that a URL
// would misread; a backend's message adds where else it takes them.
const PercentEncodeHint = "percent-encode the user name and password (@ %40, : %3A, / %2F, ? %3F, # %23, % %25)"

// CheckScheme checks that rawURL, a URL a user gave, starts with one of
// schemes (lower case, compared without regard to case) and "://", and
// returns its scheme in lower case. Otherwise its error names what is
// wrong, followed by ": want " and want (the form of the backend's URLs):
// "the URL is empty" (or is only spaces, or starts or ends with a space,
// as [CheckBlank] says), `no "//" after "memory:"` (one of schemes, then
// no "//"), "no scheme", or `scheme "redis"`. It quotes
// nothing of rawURL but a valid scheme: what stands before "://" and is
// not one may be user information.
func CheckScheme(rawURL, want string, schemes ...string) (string, error) {
	if err := CheckBlank(rawURL); err != nil {
		return "", fmt.Errorf("the URL %w: want %s", err, want)
	}
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || !ValidScheme(scheme) {
		if s, _, ok := strings.Cut(rawURL, ":"); ok && slices.Contains(schemes, strings.ToLower(s)) {
			return "", fmt.Errorf(`no "//" after "%s:": want %s`, strings.ToLower(s), want)
		}
		return "", errors.New("no scheme: want " + want)
	}
	scheme = strings.ToLower(scheme)
	if !slices.Contains(schemes, scheme) {
		return "", fmt.Errorf("scheme %q: want %s", scheme, want)
	}
	return scheme, nil
}

// ParseURL parses rawURL as url.Parse does, for a backend whose URL may
// hold a password. Its errors name what is wrong and quote nothing of
// rawURL: url.Parse's own quote the part at fault, which may be part of
// the password. It refuses a URL whose parts a password holding an
// unencoded '/', '?', '#' or '@' would have moved, as "cannot tell its
// user information from the rest": a URL without "//" after its scheme, a
// fragment, or an '@' in the path or the query. Its callers add
// [PercentEncodeHint] to the error.
func ParseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New(parseProblem(err))
	}
	if u.Opaque != "" || strings.Contains(rawURL, "#") ||
		strings.Contains(u.EscapedPath(), "@") || strings.Contains(u.RawQuery, "@") {
		return nil, errors.New("cannot tell its user information from the rest")
	}
	return u, nil
}

// parseProblem names what url.Parse refused, without quoting the URL.
func parseProblem(err error) string {
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(err, &esc):
		return "a '%' not followed by two hexadecimal digits"
	case errors.As(err, &host):
		return "an invalid character in the host"
	case strings.Contains(err.Error(), "invalid port"):
		// The text after the last ':' of the authority: a port, unless
		// the password moved it.
		return "not a valid URL (a port that is not a number from 1 to 65535, or an unencoded '/', '?' or '#' in the password)"
	}
	return "not a valid URL"
}

// Redacted is how a backend's Options print a password field: "redacted"
// when it is set, `""` when it is not, so that a reader sees whether one
// was given and never what it is.
func Redacted(password string) string {
	if password == "" {
		return `""`
	}
	return "redacted"
}

// Register registers open, a backend package's opener of URLs, for each of
// schemes with register, which is simba.RegisterBackend:
//
//	func init() { backendkit.Register(simba.RegisterBackend, openURL, "zk") }
//
// open returns the package's own backend type B, which must implement the
// interface I that register's openers return (simba.OpenedBackend);
// Register wraps it so that a failed open returns a nil I, and not a nil B
// in a non-nil interface. It panics when B does not implement I, as
// register panics on an invalid or taken scheme: a build mistake, caught
// when the package is imported. B must be a concrete type.
func Register[O ~func(context.Context, string) (I, error), I, B any](register func(string, O), open func(context.Context, string) (B, error), schemes ...string) {
	var zero B
	if _, ok := any(zero).(I); !ok {
		panic(fmt.Sprintf("backendkit: Register: %T does not implement %v", zero, reflect.TypeFor[I]()))
	}
	adapted := func(ctx context.Context, rawURL string) (I, error) {
		b, err := open(ctx, rawURL)
		if err != nil {
			var none I
			return none, err
		}
		return any(b).(I), nil
	}
	for _, s := range schemes {
		register(s, adapted)
	}
}
