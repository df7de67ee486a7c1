package sqlcore

import (
	"cmp"
	"errors"
	"net/url"
	"slices"
	"strings"
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

// URLSecrets returns the passwords u holds: in its user information and in
// the password and sslpassword parameters.
func URLSecrets(u *url.URL) []string {
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
// hold no configuration.
func (p *Pkg) ConnectError(err error, secrets []string, cause error) error {
	return &connectError{msg: p.name() + ": connect: " + MaskSecrets(err.Error(), secrets), err: cause}
}

type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// Masked returns err or, when its message shows a secret, an error with
// that message masked that still wraps err.
func Masked(err error, secrets []string) error {
	msg := err.Error()
	if masked := MaskSecrets(msg, secrets); masked != msg {
		return &maskedError{msg: masked, err: err}
	}
	return err
}

type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }
