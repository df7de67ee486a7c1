package simbasql

import (
	"cmp"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// urlHint tells how to write a password that a URL would misread.
const urlHint = "percent-encode the user name and password (@ %40, : %3A, / %2F, ? %3F, # %23, % %25) " +
	"or pass the password in Options.Password"

// parseDBURL parses the URL given to Open. It refuses a URL whose parts a
// password holding an unencoded '/', '?', '#' or '@' would have moved: an
// '@' after the host (in the path or the query), a fragment, or no "//"
// after the scheme; and, for PostgreSQL, whose URLs pgx splits at the
// first '@' where url.Parse takes the last, an authority with more than
// one. Its errors never contain any part of rawURL: url.Parse's own errors
// quote the offending part, which may be part of the password.
func parseDBURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err == nil && u.Scheme == "":
		return nil, &OptionsError{Field: "url", Reason: "want postgres://, postgresql:// or mysql://"}
	case err == nil && u.Opaque == "" && !strings.Contains(rawURL, "#") &&
		!strings.Contains(u.EscapedPath(), "@") && !strings.Contains(u.RawQuery, "@") &&
		(!isPostgres(u.Scheme) || strings.Count(authority(rawURL), "@") <= 1):
		return u, nil
	case looksLikeMySQLDSN(rawURL):
		return nil, &OptionsError{Field: "url", Reason: "a go-sql-driver/mysql DSN, not a URL: " +
			"write it as mysql://user:password@host:port/db, or open the *sql.DB yourself and use NewMySQL"}
	case err != nil:
		return nil, &OptionsError{Field: "url", Reason: urlProblem(err) + "; " + urlHint}
	}
	return nil, &OptionsError{Field: "url", Reason: "cannot tell its user information from the rest; " + urlHint}
}

func isPostgres(scheme string) bool {
	scheme = strings.ToLower(scheme)
	return scheme == "postgres" || scheme == "postgresql"
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

// looksLikeMySQLDSN reports whether s is written the way of a
// go-sql-driver/mysql DSN (user:password@tcp(host:port)/db?params).
func looksLikeMySQLDSN(s string) bool {
	if strings.Contains(s, "@tcp(") || strings.Contains(s, "@unix(") {
		return true
	}
	_, err := mysql.ParseDSN(s)
	return err == nil && !strings.Contains(s, "://")
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

// urlSecrets returns the passwords u holds: in its user information and,
// for PostgreSQL, in the password and sslpassword parameters.
func urlSecrets(u *url.URL) []string {
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	q := u.Query()
	out = append(out, q["password"]...)
	out = append(out, q["sslpassword"]...)
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// maskSecrets replaces in s every secret, as it is and percent-encoded the
// ways a URL may hold it.
func maskSecrets(s string, secrets []string) string {
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

// connectError is Open's failure to reach the database or log in. Its
// message is the driver's, with the passwords masked; it wraps the
// driver's cause (errors.Is(err, context.DeadlineExceeded) works) but no
// value that holds the configuration: pgconn.ConnectError keeps the
// password in its Config field, so it is left out of the chain.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return "simbasql: connect: " + e.msg }
func (e *connectError) Unwrap() error { return e.err }

func newConnectError(err error, secrets []string) error {
	msg := maskSecrets(err.Error(), secrets)
	for {
		var ce *pgconn.ConnectError
		if !errors.As(err, &ce) {
			break
		}
		err = ce.Unwrap()
	}
	return &connectError{msg: msg, err: err}
}

// maskedError returns err or, when its message shows a secret, an error
// with that message masked that still wraps err.
func maskedError(err error, secrets []string) error {
	msg := err.Error()
	if masked := maskSecrets(msg, secrets); masked != msg {
		return &maskedErr{msg: masked, err: err}
	}
	return err
}

type maskedErr struct {
	msg string
	err error
}

func (e *maskedErr) Error() string { return e.msg }
func (e *maskedErr) Unwrap() error { return e.err }
