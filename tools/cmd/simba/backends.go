package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simbaredis "github.com/simba-go/simba/backend-redis"
	simbazk "github.com/simba-go/simba/backend-zk"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
	_ "github.com/simba-go/simba/core/memory" // registers memory://
)

// backendOptions are the settings a URL does not carry. They reach the SQL
// backends only: the registry's openers of the other schemes take none,
// and log to slog.Default, which connect sets to simba's logger.
type backendOptions struct {
	migrate     bool         // SQL: create the tables when missing
	tablePrefix string       // SQL: the tables' prefix; "" for the default
	logger      *slog.Logger // SQL: the backend's own records; nil for none
}

// badURLError reports a backend URL that cannot be used as written: a
// usage error, unlike a server that cannot be reached.
type badURLError struct{ err error }

func (e *badURLError) Error() string { return e.err.Error() }
func (e *badURLError) Unwrap() error { return e.err }

func badURL(format string, args ...any) error {
	return &badURLError{fmt.Errorf(format, args...)}
}

// openBackend opens the backend of rawURL, after checking the URL before
// any dial: its errors about the URL are *badURLError values. The backend
// packages register their schemes with simba.OpenBackend, which opens
// every URL but the SQL ones: those are opened with the options the
// registry cannot pass (--migrate, the logger). Its errors never contain
// a password.
func openBackend(ctx context.Context, rawURL string, o backendOptions) (simba.OpenedBackend, error) {
	if err := backendkit.CheckBlank(rawURL); err != nil {
		// An unset or badly quoted variable: nothing of it is quoted.
		return nil, badURL("backend URL %v", err)
	}
	u := parseBackendURL(rawURL)
	if u.scheme == "" {
		if scheme, _, ok := strings.Cut(rawURL, ":"); ok && registered(scheme) {
			// memory: or redis:host: the scheme without "//".
			return nil, badURL("backend URL %q: missing \"//\" after \"%s:\": want %s",
				u.redactedString(), scheme, backendkit.URLForm(scheme))
		}
		return nil, badURL("backend URL %q has no scheme: want one of %s", u.redactedString(), schemeList())
	}
	if !registered(u.scheme) {
		return nil, badURL("unknown backend scheme %q: want one of %s", u.scheme, schemeList())
	}
	if err := checkURL(u); err != nil {
		return nil, err
	}
	if o.tablePrefix != "" && !sqlScheme(u.scheme) {
		return nil, badURL("--table-prefix: %s:// has no tables (postgres://, postgresql:// and mysql:// only)", strings.ToLower(u.scheme))
	}
	if err := checkAddresses(u); err != nil {
		return nil, err
	}
	b, err := dial(ctx, rawURL, strings.ToLower(u.scheme), o)
	switch {
	case isBadURL(err):
		return nil, &badURLError{err}
	case isSchemaMissing(err):
		return nil, &notSetUpError{err}
	case isNotPermitted(err):
		return nil, fmt.Errorf("%w: %s", err, grantHint)
	case isDatabaseMissing(err):
		return nil, fmt.Errorf("%w: the database of the URL does not exist: create it, or correct the URL "+
			"(simba creates its tables, not the database)", err)
	case err != nil:
		return nil, err
	}
	return b, nil
}

// dial opens rawURL, of the lower-case scheme, once checked.
func dial(ctx context.Context, rawURL, scheme string, o backendOptions) (simba.OpenedBackend, error) {
	switch scheme {
	case "postgres", "postgresql":
		// pgx recognises a URL by its lower-case scheme only.
		_, rest, _ := strings.Cut(rawURL, "://")
		b, err := simbapg.Open(ctx, scheme+"://"+rest, simbapg.Options{Migrate: o.migrate, TablePrefix: o.tablePrefix, Logger: o.logger})
		if err != nil {
			return nil, err
		}
		return b, nil
	case "mysql":
		b, err := simbamysql.Open(ctx, rawURL, simbamysql.Options{Migrate: o.migrate, TablePrefix: o.tablePrefix, Logger: o.logger})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return simba.OpenBackend(ctx, rawURL)
}

// notSetUpError is a backend whose tables are missing or outdated, told
// with the command's hint instead of the library's (Options.Migrate).
type notSetUpError struct{ err error }

func (e *notSetUpError) Error() string {
	msg := e.err.Error()
	pkg, _, _ := strings.Cut(msg, ":")
	if what, _, ok := strings.Cut(msg, ": run the migration "); ok {
		return what + ": run simba with --migrate once to create or update them, or apply " + pkg + ".Schema"
	}
	return msg + " (run simba with --migrate once to create or update them)"
}

func (e *notSetUpError) Unwrap() error { return e.err }

// isSchemaMissing reports whether err says that the SQL tables are
// missing or outdated: a configuration error (exitConfig), not an
// unavailable backend.
func isSchemaMissing(err error) bool {
	return errors.Is(err, simbapg.ErrSchemaMissing) || errors.Is(err, simbamysql.ErrSchemaMissing)
}

// isDatabaseMissing reports whether err is the server's refusal of a
// database it does not have (PostgreSQL's invalid_catalog_name, 3D000;
// MySQL's and MariaDB's ER_BAD_DB_ERROR, 1049): a configuration error
// (exitConfig) that no retry mends, not an unavailable backend.
func isDatabaseMissing(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	return errors.As(err, &pe) && pe.Code == "3D000" || errors.As(err, &me) && me.Number == 1049
}

// isNotPermitted reports whether err is the server's refusal of a
// statement on the tables or of the database to the URL's user
// (PostgreSQL's insufficient_privilege, 42501; MySQL's and MariaDB's
// ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR and
// ER_COLUMNACCESS_DENIED_ERROR, 1044, 1142 and 1143): a configuration
// error (exitConfig) that no retry mends.
func isNotPermitted(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	return errors.As(err, &pe) && pe.Code == "42501" ||
		errors.As(err, &me) && (me.Number == 1044 || me.Number == 1142 || me.Number == 1143)
}

// grantHint says what to do about isNotPermitted.
const grantHint = "the URL's user needs SELECT, INSERT, UPDATE and DELETE on simba's tables: GRANT them, or use the user that owns the tables"

// isNotSetUp reports whether err, of opening the backend or a session,
// says that the backend is not set up for simba: exitConfig.
func isNotSetUp(err error) bool {
	return isSchemaMissing(err) || isDatabaseMissing(err) || isNotPermitted(err)
}

// sqlScheme reports whether the lower-case form of scheme names a backend
// with tables.
func sqlScheme(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql", "mysql":
		return true
	}
	return false
}

// isBadURL reports whether err is about the URL or the options it holds:
// bad usage rather than an unavailable backend.
func isBadURL(err error) bool {
	if err == nil {
		return false
	}
	for _, target := range []error{
		simba.ErrInvalidURL, simba.ErrUnknownScheme,
		simbapg.ErrInvalidOptions, simbamysql.ErrInvalidOptions,
		simbaredis.ErrInvalidOptions, simbazk.ErrInvalidOptions,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// registered reports whether a backend registered scheme, in any case.
func registered(scheme string) bool {
	return slices.Contains(simba.BackendSchemes(), strings.ToLower(scheme))
}

// checkAddresses checks the hosts and ports of a redis://, rediss://,
// mysql://, postgres:// or zk:// URL before any dial, so that a typing
// error is bad usage rather than an unreachable backend, named by the part
// at fault (backendkit.SplitAddress): the port "1:99" of redis://h:1:99,
// no host in redis://:6379. A URL that url.Parse refuses was refused by
// checkURL already, or is postgres://, which the backend checks itself.
// A postgres:// URL without a host (or with a port only) means the local
// socket, as libpq reads it; the other schemes need a host.
func checkAddresses(u backendURL) error {
	var hosts []string
	socketOK := false
	switch strings.ToLower(u.scheme) {
	case "zk":
		return checkZKServers(u)
	case "redis", "rediss", "mysql":
		pu, err := url.Parse(u.raw)
		if err != nil {
			return nil
		}
		hosts = []string{pu.Host}
	case "postgres", "postgresql":
		pu, err := url.Parse(u.raw)
		if err != nil {
			return nil
		}
		hosts = strings.Split(pu.Host, ",") // pgx takes several HOST[:PORT]
		socketOK = len(hosts) == 1
	default:
		return nil
	}
	for _, hp := range hosts {
		if socketOK && (hp == "" || strings.HasPrefix(hp, ":")) {
			hp = "localhost" + hp // the socket: its port only is checked
		}
		if _, _, err := backendkit.SplitAddress(hp, false); err != nil {
			return badURL("backend URL %s: %v", u.redactedString(), err)
		}
	}
	return nil
}

// checkZKServers checks the servers of a zk:// URL with simbazk.ParseURL,
// which checks each one's host and port; its errors never hold the user
// information.
func checkZKServers(u backendURL) error {
	if _, _, err := simbazk.ParseURL(u.raw); err != nil {
		return &badURLError{err}
	}
	return nil
}

// checkURL refuses the URLs whose credentials a driver would misread, and
// so could print in part: an ambiguous '@', or a bad percent-escape, which
// url.Parse would quote. Other errors of url.Parse name the host or the
// port only, the user information being unambiguous. pgx parses
// postgres:// URLs itself and masks the password in its errors.
func checkURL(u backendURL) error {
	if u.ambiguous {
		if c := u.hostPartEnd(); c != 0 {
			return badURL("backend URL %s: a '%c' in the user information must be percent-encoded, as %%%02X: "+
				"the driver would end the host part there (percent-encode '/', '?', '#', '@' and '%%' in a password: "+
				"%%2F, %%3F, %%23, %%40, %%25)",
				u.redactedString(), c, c)
		}
		return badURL("backend URL %s: the user information may end at more than one '@': percent-encode "+
			"'@', '/', '?', '#' and '%%' in a password (%%40, %%2F, %%3F, %%23, %%25) and '@' in the path or query",
			u.redactedString())
	}
	switch strings.ToLower(u.scheme) {
	case "zk", "postgres", "postgresql":
		return nil
	}
	_, err := url.Parse(u.raw)
	var escape url.EscapeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &escape):
		return badURL("backend URL %s: invalid percent-escape: write '%%' as %%25", u.redactedString())
	default:
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL it repeats
		}
		return badURL("backend URL %s: %v", u.redactedString(), err)
	}
}

// schemeList lists the registered schemes, for messages: "memory://,
// mysql://, ...".
func schemeList() string {
	schemes := simba.BackendSchemes()
	for i, s := range schemes {
		schemes[i] = s + "://"
	}
	return strings.Join(schemes, ", ")
}
