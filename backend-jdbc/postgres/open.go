package simbapg

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
)

// Open connects to the database named by rawURL, a postgres:// or
// postgresql:// URL with every parameter pgx understands (sslmode,
// pool_max_conns, connect_timeout...), and returns a backend that owns its
// connection pool: Close closes it.
//
// Before it returns, Open checks, within ctx, that the server answers and
// accepts the credentials (a ping over a new connection) and that the
// tables exist (or creates them, with Options.Migrate), so an unreachable
// or silent server, wrong credentials and missing tables are reported
// here. When ctx ends first, Open gives up and its error wraps ctx's. Give
// ctx a deadline: a server that accepts connections but never answers is
// waited for as long as ctx allows.
//
// Options.TLS, when set, replaces the URL's sslmode and Options.Password
// its password. A user name or password holding '@', ':', '/', '?', '#' or
// '%' must be percent-encoded, or the password given in Options.Password:
// Open refuses, with an *OptionsError, a URL whose user information cannot
// be told from its host, path and query, rather than connect somewhere the
// URL did not mean. Errors never contain the password, nor any part of a
// URL that could not be parsed, nor the value of a parameter that may hold
// a credential (password, sslpassword, and any name holding "pass", "pwd",
// "secret", "token" or "credential", in any case), in any error of their
// chain and in any fmt verb, and do not wrap pgx's values that hold the
// configuration.
func Open(ctx context.Context, rawURL string, opts Options) (*Backend, error) {
	if _, err := pkg.Resolve(opts.core()); err != nil {
		return nil, err
	}
	// pgx splits the user information at its first '@', url.Parse at the
	// last: a URL with two is refused.
	u, err := pkg.ParseURL(rawURL, true, "postgres", "postgresql")
	if err != nil {
		return nil, err
	}
	secrets := sqlcore.URLSecrets(u)
	if opts.Password != "" {
		secrets = append(secrets, opts.Password)
	}
	// pgx recognises only a lower-case scheme; anything else it would read
	// as a key=value string and connect to its defaults.
	if scheme, rest, ok := strings.Cut(rawURL, "://"); ok {
		rawURL = strings.ToLower(scheme) + "://" + rest
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// A *pgconn.ParseConfigError keeps the URL whole: only its
		// message is kept, in which pgx masks the password (reliably, for
		// a URL ParseURL accepted), and every known password is masked
		// again.
		return nil, pkg.OptionsError("url", sqlcore.MaskSecrets(err.Error(), secrets))
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
		return nil, connectError(err, secrets)
	}
	b, err := newBackend(pool, opts, pool.Close)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		_ = b.Close()
		return nil, connectError(err, secrets)
	}
	if err := b.e.Ready(ctx); err != nil {
		_ = b.Close()
		return nil, sqlcore.Masked(err, secrets)
	}
	return b, nil
}

// connectError is Open's failure to reach the database or log in. It
// wraps the driver's cause (errors.Is(err, context.DeadlineExceeded)
// works) but not pgx's *pgconn.ConnectError, whose Config field holds the
// password.
func connectError(err error, secrets []string) error {
	cause := err
	for {
		var ce *pgconn.ConnectError
		if !errors.As(cause, &ce) {
			break
		}
		cause = ce.Unwrap()
	}
	return pkg.ConnectError(err, secrets, cause)
}
