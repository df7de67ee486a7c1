package simbamysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	"github.com/simba-go/simba/core/backendkit"
)

// Open connects to the database named by dataSource and returns a backend
// that owns its *sql.DB: Close closes it. dataSource is either
//
//   - a URL, mysql://user:pass@host:3306/db?tls=true, translated to a
//     go-sql-driver/mysql configuration (port 3306 by default, parseTime
//     on); the query parameters are that driver's DSN parameters (tls,
//     timeout, readTimeout, ...) or server variables; or
//   - a go-sql-driver/mysql DSN, user:pass@tcp(host:3306)/db?tls=true,
//     used as written.
//
// A URL may list several hosts, mysql://user:pass@h1:3306,h2:3306/db (a
// primary and its replicas, in any order): every new connection goes to
// the first host, in the order written, that accepts it and is writable
// (@@read_only is 0, asked on each new connection), like pgx's
// target_session_attrs=read-write. After a replica is promoted (its
// read_only turned off) and the old primary is gone or read-only, the
// next connection finds it, without a restart. Every host gets the same
// user, database and parameters; with tls=true each is verified under
// its own name. A host list with an empty host, a port that is not a
// number from 1 to 65535, or a host given twice is refused with an
// *OptionsError naming the host by its position. When no host is
// writable, the error of the connection (of Open, or of a later call)
// matches ErrNoWritableHost and names each host with its problem. A
// primary demoted while it stays up (SET GLOBAL read_only = ON) keeps the
// connections already made to it: the first statement that meets its
// read-only error (1290) fails, and every connection made until then is
// dropped instead of used again, so the next call connects to the new
// primary. A DSN names one host.
//
// Either must name a database. Before it returns, Open checks, within ctx,
// that the server answers and accepts the credentials (a ping over a new
// connection) and that the tables exist (or creates them, with
// Options.Migrate), so an unreachable or silent server, wrong credentials
// and missing tables are reported here. When ctx ends first, Open gives up
// and its error wraps ctx's. Give ctx a deadline: a server that accepts
// connections but never answers is waited for as long as ctx allows.
//
// Options.TLS, when set, replaces the tls parameter and Options.Password
// the password. In a URL, a user name or password holding '@', ':', '/',
// '?', '#' or '%' must be percent-encoded, or the password given in
// Options.Password: Open refuses, with an *OptionsError, a URL whose user
// information cannot be told from its host, path and query, rather than
// connect somewhere the URL did not mean (a DSN takes the password as
// written, up to its last '@'). A password parameter, in any case, is
// refused with an *OptionsError: go-sql-driver/mysql has none, and would
// send it to the server as the session variable password. Errors never
// contain the password, nor any part of a URL that could not be parsed,
// in any error of their chain and in any fmt verb; neither do they quote
// the data source. The driver's messages are masked of the password and
// of the value of every parameter that names a credential (a name that is
// or ends in password, pwd, pass, secret, token, credential, auth ..., in
// any case: backendkit.IsCredentialParam; not allowCleartextPasswords or
// allowNativePasswords, which are switches) that has 6 bytes or more and
// is not a number (backendkit.Maskable): a shorter one cannot be told from
// an address or a port there.
func Open(ctx context.Context, dataSource string, opts Options) (*Backend, error) {
	core, err := pkg.Resolve(opts.core())
	if err != nil {
		return nil, err
	}
	if err := backendkit.CheckBlank(dataSource); err != nil {
		return nil, pkg.OptionsError("url", "the data source "+err.Error()+
			": want mysql://user:password@host:port/dbname or user:password@tcp(host:port)/dbname")
	}
	first, hosts, err := splitHosts(dataSource)
	if err != nil {
		return nil, err
	}
	cfg, secrets, err := config(first, opts)
	if err != nil {
		return nil, err
	}
	cfg.Logger = driverLogger{core.Logger, secrets}
	var conn driver.Connector
	if hosts != nil {
		conn, err = newHostsConnector(cfg, hosts, secrets, core.Logger)
	} else {
		conn, err = mysql.NewConnector(cfg)
	}
	if err != nil {
		field := "dsn"
		if hasScheme.MatchString(dataSource) {
			field = "url"
		}
		return nil, pkg.OptionsError(field, backendkit.MaskText(err.Error(), secrets))
	}
	db := sql.OpenDB(conn)
	b, err := newBackend(db, opts, func() { _ = db.Close() })
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	// The DSN's readTimeout or timeout cuts a ping to a server that never
	// answers: with more time left in ctx, the ping is sent again.
	if err := sqlcore.PingUntil(ctx, db.PingContext, noAnswer); err != nil {
		_ = b.Close()
		// The driver's errors hold no configuration: the cause is kept.
		return nil, pkg.ConnectError(err, secrets, err)
	}
	if err := b.e.Ready(ctx); err != nil {
		_ = b.Close()
		return nil, backendkit.MaskError(err, secrets)
	}
	return b, nil
}

// noAnswer reports whether err, of a ping, may be a server that did not
// answer within the driver's own timeouts: a timeout, or the connection the
// driver gave up on after one (mysql.ErrInvalidConn, driver.ErrBadConn).
func noAnswer(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)
}

// hasScheme tells a URL from a DSN, whose user name cannot be followed by
// "://".
var hasScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// config translates Open's data source into a driver configuration, with
// the options applied, and returns the passwords it holds.
func config(dataSource string, opts Options) (*mysql.Config, []string, error) {
	var cfg *mysql.Config
	var secrets []string
	if hasScheme.MatchString(dataSource) {
		u, err := pkg.ParseURL(dataSource, false, "mysql")
		if err != nil {
			return nil, nil, err
		}
		if err := pkg.CheckHosts(u, false); err != nil {
			return nil, nil, err
		}
		secrets = append(backendkit.URLSecrets(u), opts.Password)
		if cfg, err = urlConfig(u, secrets); err != nil {
			return nil, nil, err
		}
	} else {
		secrets = append(dsnSecrets(dataSource), dsnPassword(dataSource), opts.Password)
		var err error
		if cfg, err = mysql.ParseDSN(dataSource); err != nil {
			msg := err.Error()
			if strings.HasPrefix(msg, "default addr for network") {
				// It quotes what stands before the address, which in a
				// DSN it misread may be part of the password.
				msg = "not user:password@tcp(host:port)/dbname"
			}
			return nil, nil, pkg.OptionsError("dsn", backendkit.MaskText(msg, secrets))
		}
		if cfg.Net == "tcp" {
			// The address follows the DSN's last '@': it holds no
			// password, and may be quoted. An empty host is the local
			// system, as Go's dialer reads it. The driver brackets an
			// address it cannot split ("h:1:99"), adding its default port.
			addr := cfg.Addr
			if h, p, err := net.SplitHostPort(addr); err == nil && p == "3306" && strings.Contains(h, ":") &&
				net.ParseIP(strings.SplitN(h, "%", 2)[0]) == nil {
				addr = h
			}
			if strings.HasPrefix(addr, ":") {
				addr = "localhost" + addr
			}
			if _, _, err := backendkit.SplitAddress(addr, true); err != nil {
				return nil, nil, pkg.OptionsError("dsn", err.Error())
			}
		}
		if cfg.DBName == "" {
			return nil, nil, pkg.OptionsError("dsn", "no database name after the '/'")
		}
		if hasPasswordParam(url.Values(nil), cfg.Params) {
			return nil, nil, pkg.OptionsError("dsn", passwordParamReason)
		}
	}
	if opts.Password != "" {
		cfg.Passwd = opts.Password
	}
	if opts.TLS != nil {
		cfg.TLS = opts.TLS.Clone()
	}
	return cfg, secrets, nil
}

// urlConfig translates a mysql:// URL, already checked by ParseURL.
func urlConfig(u *url.URL, secrets []string) (*mysql.Config, error) {
	if hasPasswordParam(u.Query()) {
		return nil, pkg.OptionsError("url", passwordParamReason)
	}
	// ParseDSN validates and applies the driver parameters; the address is
	// filled in afterwards, so TLS is resolved again for the real host.
	cfg, err := mysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, pkg.OptionsError("url", "query parameters: "+backendkit.MaskText(err.Error(), secrets))
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if strings.Contains(cfg.User, ":") {
		return nil, pkg.OptionsError("url", "user name contains ':'")
	}
	cfg.Net = "tcp"
	switch host, port := u.Hostname(), u.Port(); {
	case host == "":
		cfg.Addr = "127.0.0.1:3306"
	case port == "":
		cfg.Addr = net.JoinHostPort(host, "3306")
	default:
		cfg.Addr = net.JoinHostPort(host, port)
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return nil, pkg.OptionsError("url", "no database name in the path")
	}
	cfg.ParseTime = true
	cfg.TLS = nil // recomputed from TLSConfig for the real address
	return cfg, nil
}

// passwordParamReason is why a password parameter is refused.
const passwordParamReason = "a password parameter would be sent to the server as the session variable " +
	"password (SET password=...): give the password in the user information or in Options.Password"

// hasPasswordParam reports whether a query, or the driver's parameters of
// a DSN, hold "password" in any case: go-sql-driver/mysql has no such
// parameter and would set it as a session variable, which is either an
// error quoting the password or a change of the user's password.
func hasPasswordParam(q url.Values, params ...map[string]string) bool {
	for k := range q {
		if strings.EqualFold(k, "password") {
			return true
		}
	}
	for _, p := range params {
		for k := range p {
			if strings.EqualFold(k, "password") {
				return true
			}
		}
	}
	return false
}

// dsnSecrets returns the values of the parameters of a DSN that may hold
// a credential (backendkit.IsCredentialParam), as written and unescaped.
func dsnSecrets(dsn string) []string {
	_, query, ok := strings.Cut(dsn[strings.LastIndexByte(dsn, '/')+1:], "?")
	if !ok {
		return nil
	}
	u := url.URL{RawQuery: query}
	return backendkit.URLSecrets(&u)
}

// dsnPassword returns the password of a DSN the way go-sql-driver/mysql
// finds it, between the first ':' and the last '@' before the last '/',
// also when the rest of the DSN is invalid, so that it can be masked.
func dsnPassword(dsn string) string {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		slash = len(dsn)
	}
	at := strings.LastIndexByte(dsn[:slash], '@')
	if at < 0 {
		return ""
	}
	colon := strings.IndexByte(dsn[:at], ':')
	if colon < 0 {
		return ""
	}
	return dsn[colon+1 : at]
}

// driverLogger sends go-sql-driver/mysql's messages (dropped connections)
// to Options.Logger at Debug level instead of the standard error, with the
// passwords masked.
type driverLogger struct {
	log     *slog.Logger
	secrets []string
}

func (l driverLogger) Print(v ...any) {
	l.log.Debug(pkg.Name + ": mysql driver: " + backendkit.MaskText(fmt.Sprint(v...), l.secrets))
}
