package sqlcore

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/simba-go/simba/core/backendkit"
)

// URLHint tells how to write a password that a URL would misread.
const URLHint = backendkit.PercentEncodeHint + " or pass the password in Options.Password"

// ParseURL parses the URL given to Open (backendkit.ParseURL) once its
// scheme is one of schemes, compared without case
// (backendkit.CheckScheme). With oneAt it also refuses an authority with
// more than one '@', for drivers that split it at the first where
// url.Parse takes the last. A list of hosts is kept as written, for
// CheckHosts. Its errors are *OptionsError values of the field "url" that
// quote nothing of rawURL but its scheme.
func (p *Pkg) ParseURL(rawURL string, oneAt bool, schemes ...string) (*url.URL, error) {
	if _, err := backendkit.CheckScheme(rawURL, strings.Join(schemes, "://, ")+"://", schemes...); err != nil {
		return nil, p.OptionsError("url", err.Error())
	}
	// A list of hosts (h1:5432,h2) is no host url.Parse takes when its
	// last host has no port: the URL is parsed with one host in its place,
	// then given the list back, which CheckHosts checks.
	scheme, rest, _ := strings.Cut(rawURL, "://")
	auth := authority(rawURL)
	parseable, hostList := rawURL, ""
	at := strings.LastIndexByte(auth, '@')
	if list := auth[at+1:]; strings.Contains(list, ",") {
		parseable, hostList = scheme+"://"+auth[:at+1]+"hosts"+rest[len(auth):], list
	}
	u, err := backendkit.ParseURL(parseable)
	if err == nil && oneAt && strings.Count(auth, "@") > 1 {
		err = errors.New("cannot tell its user information from the rest")
	}
	if err != nil {
		return nil, p.OptionsError("url", err.Error()+"; "+URLHint)
	}
	if hostList != "" {
		u.Host = hostList
	}
	return u, nil
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
		o.Type, o.TablePrefix, o.Migrate, o.CleanupInterval, o.TLS, backendkit.Redacted(o.Password), o.Logger)
}

// LogValue is the options as a slog group, with the password redacted.
func (o Printed) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("table_prefix", o.TablePrefix),
		slog.Bool("migrate", o.Migrate),
		slog.Duration("cleanup_interval", o.CleanupInterval),
		slog.Bool("tls", o.TLS),
		slog.String("password", backendkit.Redacted(o.Password)),
	)
}
