package simbasql

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open connects to the database named by rawURL and returns a backend that
// owns its client; Close closes it.
//
//   - postgres://user:pass@host:5432/db?sslmode=require (or postgresql://):
//     every parameter pgx understands, sslmode and pool_max_conns included.
//   - mysql://user:pass@host:3306/db?tls=true: translated to a
//     go-sql-driver/mysql configuration (parseTime is always on); the
//     other query parameters are that driver's DSN parameters (tls,
//     timeout, readTimeout, ...) or server variables.
//
// Options.TLS, when set, replaces the URL's TLS settings and
// Options.Password its password. A user name or password holding '@', ':',
// '/', '?', '#' or '%' must be percent-encoded, or the password given in
// Options.Password: Open refuses a URL whose user information cannot be
// told from its host, path and query, rather than connect somewhere the URL
// did not mean. A go-sql-driver/mysql DSN is refused too (use NewMySQL).
//
// Open checks the connection and the schema (or migrates it, with
// Options.Migrate) before it returns, so wrong credentials, an unreachable
// server and missing tables are reported here. Errors never contain the
// password, nor any part of a URL that could not be parsed, and do not
// wrap the drivers' values that hold their configuration.
func Open(ctx context.Context, rawURL string, opts Options) (*Backend, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	u, err := parseDBURL(rawURL)
	if err != nil {
		return nil, err
	}
	secrets := urlSecrets(u)
	if opts.Password != "" {
		secrets = append(secrets, opts.Password)
	}
	var b *Backend
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
		b, err = openPostgres(ctx, rawURL, opts, secrets)
	case "mysql":
		b, err = openMySQL(ctx, u, opts, secrets)
	default:
		return nil, &OptionsError{Field: "url", Reason: fmt.Sprintf("scheme %q: want postgres, postgresql or mysql", u.Scheme)}
	}
	if err != nil {
		return nil, err
	}
	if err := b.ready(ctx); err != nil {
		b.Close()
		return nil, maskedError(err, secrets)
	}
	return b, nil
}

func openPostgres(ctx context.Context, rawURL string, opts Options, secrets []string) (*Backend, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// A *pgconn.ParseConfigError keeps the URL whole: only its
		// message is kept, in which pgx masks the password (reliably, for
		// a URL parseDBURL accepted), and every known password is masked
		// again.
		return nil, &OptionsError{Field: "url", Reason: maskSecrets(err.Error(), secrets)}
	}
	if opts.TLS != nil {
		cfg.ConnConfig.TLSConfig = opts.TLS.Clone()
		for _, fb := range cfg.ConnConfig.Fallbacks {
			fb.TLSConfig = opts.TLS.Clone()
		}
	}
	if opts.Password != "" {
		cfg.ConnConfig.Password = opts.Password
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, newConnectError(err, secrets)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, newConnectError(err, secrets)
	}
	b, err := newBackend(Postgres, opts, func(t tables) store { return newPGStore(pool, t) }, pool.Close)
	if err != nil {
		pool.Close()
	}
	return b, err
}

// mysqlConfig translates a mysql:// URL, already checked by parseDBURL,
// into a driver configuration.
func mysqlConfig(u *url.URL, opts Options, secrets []string) (*mysql.Config, error) {
	// ParseDSN validates and applies the driver parameters; the address is
	// filled in afterwards, so TLS is resolved again for the real host.
	cfg, err := mysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, &OptionsError{Field: "url", Reason: "query parameters: " + maskSecrets(err.Error(), secrets)}
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if opts.Password != "" {
		cfg.Passwd = opts.Password
	}
	if strings.Contains(cfg.User, ":") {
		return nil, &OptionsError{Field: "url", Reason: "user name contains ':'"}
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
		return nil, &OptionsError{Field: "url", Reason: "no database name in the path"}
	}
	cfg.ParseTime = true
	cfg.Logger = driverLogger{opts.Logger, secrets}
	cfg.TLS = nil // recomputed from TLSConfig for the real address
	if opts.TLS != nil {
		cfg.TLS = opts.TLS.Clone()
	}
	return cfg, nil
}

// driverLogger sends go-sql-driver/mysql's messages (dropped connections)
// to Options.Logger at Debug level instead of the standard error, with the
// passwords masked.
type driverLogger struct {
	log     *slog.Logger
	secrets []string
}

func (l driverLogger) Print(v ...any) {
	if l.log != nil {
		l.log.Debug("simbasql: mysql driver: " + maskSecrets(fmt.Sprint(v...), l.secrets))
	}
}

func openMySQL(ctx context.Context, u *url.URL, opts Options, secrets []string) (*Backend, error) {
	cfg, err := mysqlConfig(u, opts, secrets)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, &OptionsError{Field: "url", Reason: maskSecrets(err.Error(), secrets)}
	}
	db := sql.OpenDB(conn)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, newConnectError(err, secrets)
	}
	b, err := newBackend(MySQL, opts, func(t tables) store { return newMySQLStore(db, t) }, func() { db.Close() })
	if err != nil {
		db.Close()
	}
	return b, err
}
