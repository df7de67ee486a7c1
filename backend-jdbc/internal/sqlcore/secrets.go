package sqlcore

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// URLHint tells how to write a password that a URL would misread.
const URLHint = "percent-encode the user name and password (@ %40, : %3A, / %2F, ? %3F, # %23, % %25) " +
	"or pass the password in Options.Password"

// ParseURL parses the URL given to Open and checks that its scheme is one
// of schemes (compared without case). It refuses a URL whose parts a
// password holding an unencoded '/', '?', '#' or '@' would have moved: an
// '@' after the host (in the path or the query), a fragment, or no "//"
// after the scheme; and, with oneAt, an authority with more than one '@'
// (for drivers that split it at the first where url.Parse takes the last).
// Its errors never contain any part of rawURL: url.Parse's own errors
// quote the offending part, which may be part of the password.
func (p *Pkg) ParseURL(rawURL string, oneAt bool, schemes ...string) (*url.URL, error) {
	want := "want " + strings.Join(schemes, "://, ") + "://"
	u, err := url.Parse(rawURL)
	switch {
	case err == nil && u.Scheme == "":
		return nil, p.OptionsError("url", "no scheme: "+want)
	case err == nil && !slices.Contains(schemes, strings.ToLower(u.Scheme)):
		return nil, p.OptionsError("url", "scheme "+strings.ToLower(u.Scheme)+": "+want)
	case err == nil && u.Opaque == "" && !strings.Contains(rawURL, "#") &&
		!strings.Contains(u.EscapedPath(), "@") && !strings.Contains(u.RawQuery, "@") &&
		(!oneAt || strings.Count(authority(rawURL), "@") <= 1):
		return u, nil
	case err != nil:
		return nil, p.OptionsError("url", urlProblem(err)+"; "+URLHint)
	}
	return nil, p.OptionsError("url", "cannot tell its user information from the rest; "+URLHint)
}

// authority returns what follows "scheme://" in rawURL, up to the path,
// query or fragment.
func authority(rawURL string) string {
	_, rest, _ := strings.Cut(rawURL, "://")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// urlProblem names what url.Parse refused, without quoting the URL.
func urlProblem(err error) string {
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(err, &esc):
		return "a '%' not followed by two hexadecimal digits"
	case errors.As(err, &host):
		return "an invalid character in the host"
	}
	return "not a valid URL"
}

// SecretKey reports whether a query parameter named key may hold a
// credential: after lower-casing and dropping '_', '-' and '.', a name that
// contains "pass" or "pwd" (password, sslpassword, passwd ...), "secret",
// "token", "credential" or "auth". pgx takes password and
// sslpassword; the rest, which pgx would send as server settings and
// go-sql-driver/mysql as session variables, are masked too, since whoever
// wrote them meant a secret.
func SecretKey(key string) bool {
	k := strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(key))
	for _, part := range []string{"pass", "pwd", "secret", "token", "credential", "auth"} {
		if strings.Contains(k, part) {
			return true
		}
	}
	return false
}

// URLSecrets returns the passwords u holds: in its user information and in
// the parameters SecretKey names, as written and unescaped.
func URLSecrets(u *url.URL) []string {
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	if u.RawQuery != "" {
		for _, pair := range strings.Split(u.RawQuery, "&") {
			rawKey, rawValue, _ := strings.Cut(pair, "=")
			key, err := url.QueryUnescape(rawKey)
			if err != nil {
				key = rawKey
			}
			if !SecretKey(key) {
				continue
			}
			out = append(out, rawValue)
			if v, err := url.QueryUnescape(rawValue); err == nil {
				out = append(out, v)
			}
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// MaskSecrets replaces in s every secret, as it is and percent-encoded the
// ways a URL may hold it.
func MaskSecrets(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		forms := []string{sec, url.QueryEscape(sec), url.PathEscape(sec), url.User(sec).String()}
		slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
		for _, f := range forms {
			s = strings.ReplaceAll(s, f, "xxxxx")
		}
	}
	return s
}

// ConnectError is Open's failure to reach the database or log in: the
// driver's message with the passwords masked, wrapping cause, which must
// hold no configuration (masked as Masked does).
func (p *Pkg) ConnectError(err error, secrets []string, cause error) error {
	return &connectError{msg: p.name() + ": connect: " + MaskSecrets(err.Error(), secrets), err: Masked(cause, secrets)}
}

type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// Masked returns err when nothing it or its chain shows (Error, %+v, %#v)
// holds a secret, and otherwise an error with the message masked whose
// chain holds err's, each error masked the same way unless it shows no
// secret: errors.Is still finds the sentinels, errors.As the driver's
// values that show none.
func Masked(err error, secrets []string) error {
	secrets = slices.DeleteFunc(slices.Clone(secrets), func(s string) bool { return s == "" })
	if err == nil || len(secrets) == 0 || !showsSecret(err, secrets) {
		return err
	}
	return &maskedError{err: err, secrets: secrets}
}

// showsSecret reports whether a text err or an error of its chain shows
// holds a secret.
func showsSecret(err error, secrets []string) bool {
	for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if MaskSecrets(text, secrets) != text {
			return true
		}
	}
	return slices.ContainsFunc(unwrapped(err), func(e error) bool { return showsSecret(e, secrets) })
}

// unwrapped returns the errors err wraps, one or several.
func unwrapped(err error) []error {
	switch u := err.(type) { //nolint:errorlint // one level of the chain, walked by the callers
	case interface{ Unwrap() error }:
		if x := u.Unwrap(); x != nil {
			return []error{x}
		}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

type maskedError struct {
	err     error
	secrets []string
}

func (e *maskedError) Error() string { return MaskSecrets(e.err.Error(), e.secrets) }

// GoString keeps %#v from printing the fields, the secrets included.
func (e *maskedError) GoString() string {
	return "sqlcore.maskedError(" + strconv.Quote(e.Error()) + ")"
}

// Is reports whether err's chain matches target: a yes or no shows
// nothing of it.
func (e *maskedError) Is(target error) bool { return errors.Is(e.err, target) }

func (e *maskedError) Unwrap() []error {
	inner := unwrapped(e.err)
	out := make([]error, 0, len(inner))
	for _, x := range inner {
		out = append(out, Masked(x, e.secrets))
	}
	return out
}

// Printed is what the public Options types of the SQL backends print and
// log: every field but the password, which shows as "redacted" when set.
type Printed struct {
	Type            string // e.g. "simbapg.Options"
	TablePrefix     string
	Migrate         bool
	CleanupInterval time.Duration
	TLS             bool
	Password        string
	Logger          bool
}

// String describes the options, with the password redacted.
func (o Printed) String() string {
	return fmt.Sprintf("%s{TablePrefix:%q Migrate:%t CleanupInterval:%v TLS:%t Password:%s Logger:%t}",
		o.Type, o.TablePrefix, o.Migrate, o.CleanupInterval, o.TLS, redactedField(o.Password), o.Logger)
}

// LogValue is the options as a slog group, with the password redacted.
func (o Printed) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("table_prefix", o.TablePrefix),
		slog.Bool("migrate", o.Migrate),
		slog.Duration("cleanup_interval", o.CleanupInterval),
		slog.Bool("tls", o.TLS),
		slog.String("password", redactedField(o.Password)),
	)
}

// redactedField stands for a password: "redacted", or `""` when unset.
func redactedField(p string) string {
	if p == "" {
		return `""`
	}
	return "redacted"
}
