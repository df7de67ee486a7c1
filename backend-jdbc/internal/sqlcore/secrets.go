package sqlcore

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/simba-go/simba/core/backendkit"
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
	if err := backendkit.CheckBlank(rawURL); err != nil {
		return nil, p.OptionsError("url", "the URL "+err.Error()+": "+want)
	}
	// A list of hosts (h1:5432,h2) is no host url.Parse takes when its
	// last host has no port: the URL is parsed with one host in its place,
	// then given the list back, which CheckHosts checks.
	parseable, hostList := rawURL, ""
	if scheme, rest, ok := strings.Cut(rawURL, "://"); ok {
		auth := authority(rawURL)
		at := strings.LastIndexByte(auth, '@')
		if list := auth[at+1:]; strings.Contains(list, ",") {
			parseable, hostList = scheme+"://"+auth[:at+1]+"hosts"+rest[len(auth):], list
		}
	}
	u, err := url.Parse(parseable)
	if err == nil && hostList != "" {
		u.Host = hostList
	}
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
	case strings.Contains(err.Error(), "invalid port"):
		// The text after the last ':' of the authority: a port, unless
		// the password moved it.
		return "not a valid URL (a port that is not a number from 1 to 65535, or an unencoded '/', '?' or '#' in the password)"
	}
	return "not a valid URL"
}

// CheckHosts checks the hosts of u, a URL ParseURL returned: one
// HOST[:PORT] or several separated by ',', each a host name or address
// and a port from 1 to 65535 (backendkit.SplitAddress), so that a
// mistyped address is refused before any dial by an error that names it.
// With localOK a URL of one empty host, with or without a port, passes:
// the driver's local default (libpq's socket) is meant.
func (p *Pkg) CheckHosts(u *url.URL, localOK bool) error {
	hosts := strings.Split(u.Host, ",")
	for i, h := range hosts {
		if localOK && len(hosts) == 1 && (h == "" || strings.HasPrefix(h, ":")) {
			h = "localhost" + h // its port only is checked
		}
		if _, _, err := backendkit.SplitAddress(h, false); err != nil {
			if len(hosts) > 1 {
				return p.OptionsError("url", fmt.Sprintf("host %d of %d: %v", i+1, len(hosts), err))
			}
			return p.OptionsError("url", err.Error())
		}
	}
	return nil
}

// ConnectError is Open's failure to reach the database or log in: the
// driver's message with the passwords masked (backendkit.MaskText),
// wrapping cause, which must hold no configuration (masked as
// backendkit.MaskError does).
func (p *Pkg) ConnectError(err error, secrets []string, cause error) error {
	return &connectError{msg: p.name() + ": connect: " + backendkit.MaskText(err.Error(), secrets),
		err: backendkit.MaskError(cause, secrets)}
}

type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

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
