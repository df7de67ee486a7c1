package simbapg

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	"github.com/simba-go/simba/core/backendkit"
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
// waited for as long as ctx allows (a connect that the per-host timeout
// below cut is tried again while ctx allows).
//
// A URL may name several hosts (postgres://user@h1:5432,h2:5432/db) with
// target_session_attrs=read-write, so that each new connection goes to the
// first host that accepts writes: after a promotion, a connection to the
// old primary fails, the pool drops it, and the next one goes to the new
// primary, without a reopen. Each host gets connect_timeout to answer
// before the next is tried, DefaultConnectTimeout when neither the URL
// nor PGCONNECT_TIMEOUT sets it.
//
// Options.TLS, when set, replaces the URL's sslmode and Options.Password
// its password. A user name or password holding '@', ':', '/', '?', '#' or
// '%' must be percent-encoded, or the password given in Options.Password:
// Open refuses, with an *OptionsError, a URL whose user information cannot
// be told from its host, path and query, rather than connect somewhere the
// URL did not mean. Errors never contain the password, nor any part of a
// URL that could not be parsed, in any error of their chain and in any fmt
// verb, and do not wrap pgx's values that hold the configuration. A URL an
// error quotes shows the value of every parameter that names a credential
// masked (password, sslpassword, and any name that is or ends in password,
// pwd, pass, secret, token, credential, auth ..., in any case:
// backendkit.IsCredentialParam; not require_auth, whose value names
// methods) and every other byte as written; a URL holding a '=' elsewhere
// (sslmode=disable password=abc12: a credential inside another value) or
// a '`' is not quoted at all. pgx's other messages are
// masked of those values and of the password when they have 6 bytes or
// more and are not numbers (backendkit.Maskable): a shorter one cannot be
// told from an address or a port there, and pgx quotes neither.
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
	if err := pkg.CheckHosts(u, true); err != nil {
		return nil, err
	}
	secrets := backendkit.URLSecrets(u)
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
		// message is kept, with the URL it quotes printed again by
		// backendkit.RedactURL, and every known password is masked again.
		return nil, pkg.OptionsError("url", backendkit.MaskText(parseErrorMessage(err.Error(), u, rawURL), secrets))
	}
	if opts.TLS != nil {
		useTLS(&cfg.ConnConfig.Config, opts.TLS)
	}
	if opts.Password != "" {
		cfg.ConnConfig.Password = opts.Password
	}
	boundConnect(&cfg.ConnConfig.Config, u)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(err, secrets)
	}
	b, err := newBackend(pool, opts, pool.Close)
	if err != nil {
		pool.Close()
		return nil, err
	}
	// A host that never answers fails a connect at connect_timeout:
	// with more time left in ctx, the hosts are tried again.
	if err := sqlcore.PingUntil(ctx, pool.Ping, pgconn.Timeout); err != nil {
		_ = b.Close()
		return nil, connectError(err, secrets)
	}
	if err := b.e.Ready(ctx); err != nil {
		_ = b.Close()
		return nil, poolerHint(backendkit.MaskError(err, secrets))
	}
	return b, nil
}

// DefaultConnectTimeout is the time Open's pool gives each host to accept
// a new connection, when neither the URL's connect_timeout nor
// PGCONNECT_TIMEOUT sets it. pgx would otherwise wait for ever: the pool
// makes a connection in the background, without the deadline of the call
// that asked for it, so a host that accepts TCP connections and never
// answers (hung, or cut off behind a proxy) held every slot of the pool,
// and a multi-host URL never reached its next host.
const DefaultConnectTimeout = 5 * time.Second

// boundConnect gives cfg DefaultConnectTimeout unless the URL u or
// PGCONNECT_TIMEOUT chose a connect_timeout, 0 (no bound) included.
func boundConnect(cfg *pgconn.Config, u *url.URL) {
	if _, set := u.Query()["connect_timeout"]; set || os.Getenv("PGCONNECT_TIMEOUT") != "" {
		return
	}
	cfg.ConnectTimeout = DefaultConnectTimeout
}

// poolerHint adds to err, when the server said that a prepared statement
// of pgx's cache already exists or does not (42P05, 26000), what that
// means: a pooler in transaction or statement mode (pgbouncer before
// 1.21, or without max_prepared_statements) gave this connection a server
// connection that another client prepared statements on.
func poolerHint(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || (pe.Code != "42P05" && pe.Code != "26000") {
		return err
	}
	return fmt.Errorf("%w (is a pooler in transaction or statement mode, such as pgbouncer, between the backend "+
		"and the server? pgx's statement cache needs a server connection of its own: add "+
		"default_query_exec_mode=exec to the URL, or use session pooling)", err)
}

// parseErrorMessage is the message of pgx's *pgconn.ParseConfigError,
// "cannot parse `URL`: why", with URL printed by backendkit.RedactURL:
// pgx masks the password and the password and sslpassword parameters,
// but not the other credentials' values, which may be too short for
// backendkit.MaskText to look for. A URL that RedactURL would not print
// without a credential (quotable), or that holds a '`' that would make the
// quoted part ambiguous, is left out: "cannot parse the URL: why", why
// being what follows the last "`: ", after every byte of the URL. A
// message of another shape is returned as it is.
func parseErrorMessage(msg string, u *url.URL, rawURL string) string {
	const prefix, end = "cannot parse `", "`: "
	rest, ok := strings.CutPrefix(msg, prefix)
	switch {
	case !ok:
		return msg
	case strings.Contains(rawURL, "`") || !quotable(u):
		if i := strings.LastIndex(rest, end); i >= 0 {
			return "cannot parse the URL: " + rest[i+len(end):]
		}
	default:
		if _, why, ok := strings.Cut(rest, end); ok {
			return prefix + backendkit.RedactURL(u) + end + why
		}
	}
	return "cannot parse the URL"
}

// quotable reports whether backendkit.RedactURL prints u without a
// credential. It masks the password and the value of every credential
// parameter, and prints the rest as written: a '=' there, as written or
// percent-encoded, may be the separator of a credential it does not see,
// however short (the value of sslmode in sslmode=disable password=abc12,
// which pgx refuses as one more separator).
func quotable(u *url.URL) bool {
	parts := []string{u.User.Username(), u.Host, u.Path, u.RawPath}
	for pair := range strings.SplitSeq(u.RawQuery, "&") {
		key, value, _ := strings.Cut(pair, "=")
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
		if !backendkit.IsCredentialParam(key) { // a credential's value is masked whole
			parts = append(parts, value)
		}
	}
	return !slices.ContainsFunc(parts, func(p string) bool {
		return strings.Contains(p, "=") || strings.Contains(strings.ToUpper(p), "%3D")
	})
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
