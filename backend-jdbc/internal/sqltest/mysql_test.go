package sqltest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"fmt"
	"net/url"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	"github.com/simba-go/simba/core/backendtest"
)

// TestMySQL runs the suite on the MySQL or MariaDB server of
// SIMBA_TEST_MYSQL_URL, a go-sql-driver/mysql DSN.
func TestMySQL(t *testing.T) { Run(t, myHarness()) }

// TestMySQLIsolation runs the tests whose statements depend on the
// isolation level again, with READ COMMITTED, then SERIALIZABLE, as the
// default of every connection (a session variable the DSN sets): the
// backend must not depend on the server's default, InnoDB's being
// REPEATABLE READ, which TestMySQL runs at.
func TestMySQLIsolation(t *testing.T) {
	for _, level := range []string{"READ-COMMITTED", "SERIALIZABLE"} {
		t.Run(level, func(t *testing.T) {
			h := myHarness()
			h.Server = func(t testing.TB, raw string) string { return myWithIsolation(t, raw, level) }
			h.Only = IsolationTests
			Run(t, h)
		})
	}
}

const myTLSEnv = "SIMBA_TEST_MYSQL_TLS_URL"

// TestMySQLTLS runs the conformance suite over TLS, as the password user
// of SIMBA_TEST_MYSQL_TLS_URL, on a server that requires secure transport:
// the tests' own clients take the DSN (tls=custom), Open the mysql:// URL
// made of it.
func TestMySQLTLS(t *testing.T) {
	myTLSServer(t)
	h := myTLSHarness()
	h.EnvVar = myTLSEnv
	h.Only = TLSTests
	Run(t, h)
}

func BenchmarkMySQL(b *testing.B) { Bench(b, myHarness()) }

// myWithIsolation returns raw with a parameter that makes level the
// isolation of every connection's transactions, and checks that it does:
// transaction_isolation on MySQL 8 and MariaDB 11.1+, tx_isolation on
// earlier MariaDB.
func myWithIsolation(t testing.TB, raw, level string) string {
	t.Helper()
	for _, name := range []string{"transaction_isolation", "tx_isolation"} {
		cfg := myDSN(t, raw)
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[name] = "'" + level + "'"
		dsn := cfg.FormatDSN()
		db := myDB(t, dsn, 1)
		var got string
		if err := db.QueryRowContext(t.Context(), "SELECT @@"+name).Scan(&got); err != nil {
			continue // unknown on this server: try the other name
		}
		if got != level {
			t.Fatalf("%s = %q on a connection of the DSN, want %q", name, got, level)
		}
		return dsn
	}
	t.Fatal("the server takes neither transaction_isolation nor tx_isolation")
	return ""
}

func myOptions(o sqlcore.Options) simbamysql.Options {
	return simbamysql.Options{TablePrefix: o.TablePrefix, Migrate: o.Migrate, CleanupInterval: o.CleanupInterval, Logger: o.Logger}
}

func myDSN(t testing.TB, raw string) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(raw)
	if err != nil {
		t.Fatalf("SIMBA_TEST_MYSQL_URL: %v", err)
	}
	return cfg
}

// myDB returns a client of raw, closed when t ends.
func myDB(t testing.TB, raw string, maxConns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", raw)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// myBackends returns New on db.
func myBackends(db *sql.DB) func(sqlcore.Options) (Backend, error) {
	return func(o sqlcore.Options) (Backend, error) {
		b, err := simbamysql.New(db, myOptions(o))
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// myHarness is the harness of the MySQL or MariaDB server of
// SIMBA_TEST_MYSQL_URL, a go-sql-driver/mysql DSN.
func myHarness() Harness {
	return Harness{
		Pkg: &sqlcore.Pkg{Name: "simbamysql", ErrClosed: simbamysql.ErrClosed, ErrSchemaMissing: simbamysql.ErrSchemaMissing,
			ErrInvalidOptions: simbamysql.ErrInvalidOptions, ErrInvalidFence: simbamysql.ErrInvalidFence, ErrFenceRowMissing: simbamysql.ErrFenceRowMissing},
		EnvVar:       "SIMBA_TEST_MYSQL_URL",
		Schema:       simbamysql.Schema,
		OldSchema:    myOldSchema,
		SplitAcquire: true,
		Connect: func(t testing.TB, raw string) (func(sqlcore.Options) (Backend, error), Admin) {
			db := myDB(t, raw, 0)
			return myBackends(db), myAdmin{db}
		},
		Open: func(ctx context.Context, dataSource string, o OpenOptions) (Backend, error) {
			opts := myOptions(o.Options)
			opts.Password = o.Password
			b, err := simbamysql.Open(ctx, dataSource, opts)
			if err != nil {
				return nil, err
			}
			return b, nil
		},
		// The server itself is reached through a mysql:// URL, and through
		// the test's proxies with a DSN: both forms Open takes connect.
		URL: func(t testing.TB, raw, addr string) string {
			cfg := myDSN(t, raw)
			if addr != "" {
				cfg.Addr = addr
				return cfg.FormatDSN()
			}
			user := cfg.User
			if cfg.Passwd != "" {
				user += ":" + cfg.Passwd
			}
			q := url.Values{}
			for k, v := range cfg.Params {
				q.Set(k, v)
			}
			if len(q) == 0 {
				return fmt.Sprintf("mysql://%s@%s/%s", user, cfg.Addr, cfg.DBName)
			}
			return fmt.Sprintf("mysql://%s@%s/%s?%s", user, cfg.Addr, cfg.DBName, q.Encode())
		},
		Addr: func(t testing.TB, raw string) string { return myDSN(t, raw).Addr },
		// go-sql-driver never asks the server to cancel a statement.
		Uncancelled: func(t testing.TB, raw string, o sqlcore.Options) Backend {
			b, err := myBackends(myDB(t, raw, 0))(o)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Later:     func(s int) string { return fmt.Sprintf("UTC_TIMESTAMP(6) + INTERVAL %d SECOND", s) },
		LockWaits: "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
		SingleConn: func(t testing.TB, raw string, o sqlcore.Options) (Backend, func(context.Context) (int64, error)) {
			db := myDB(t, raw, 1)
			b, err := myBackends(db)(o)
			if err != nil {
				t.Fatal(err)
			}
			return b, func(ctx context.Context) (int64, error) {
				var id int64
				err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
				return id, err
			}
		},
		RowsRead: func(t testing.TB, raw string, o sqlcore.Options) (Backend, func(context.Context) (int64, error)) {
			db := myDB(t, raw, 1)
			b, err := myBackends(db)(o)
			if err != nil {
				t.Fatal(err)
			}
			return b, func(ctx context.Context) (int64, error) {
				rows, err := db.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
				if err != nil {
					return 0, err
				}
				defer rows.Close()
				var total int64
				for rows.Next() {
					var name string
					var n int64
					if err := rows.Scan(&name, &n); err != nil {
						return 0, err
					}
					total += n
				}
				return total, rows.Err()
			}
		},
		Kill: func(ctx context.Context, a Admin, id int64) error {
			return a.Exec(ctx, fmt.Sprintf("KILL %d", id)) // KILL takes no placeholder; id is an integer
		},
		Fences: []FenceClient{{Name: "default", Open: openMyFence(false)}, {Name: "clientFoundRows", Open: openMyFence(true)}},
		Quote:  "`",
		Secrets: func(t testing.TB, raw string) Secrets {
			cfg := myDSN(t, raw)
			return Secrets{
				Schemes: []string{"mysql"},
				Host:    cfg.Addr,
				DB:      "/" + cfg.DBName,
				Invalid: "?tls=nosuch",
				DSN:     true,
			}
		},
	}
}

// myOldSchema is the tables as the versions before migration 2 created
// them.
var myOldSchema = []string{
	`CREATE TABLE IF NOT EXISTS {session} (
    id         CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    expires_at DATETIME(6) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    PRIMARY KEY (id),
    KEY {p}session_exp (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS {lease} (
    name        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id  CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    token       BIGINT NOT NULL,
    acquired_at DATETIME(6) NOT NULL,
    PRIMARY KEY (name),
    KEY {p}lease_sid (session_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS {member} (
    group_name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    joined_at  DATETIME(6) NOT NULL,
    PRIMARY KEY (group_name, session_id),
    KEY {p}member_sid (session_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
}

// myAdmin runs the tests' statements on a client of their own.
type myAdmin struct{ db *sql.DB }

func (a myAdmin) Exec(ctx context.Context, q string, args ...any) error {
	_, err := a.db.ExecContext(ctx, q, args...)
	return err
}

func (a myAdmin) Scan(ctx context.Context, q string, args []any, dest ...any) error {
	return a.db.QueryRowContext(ctx, q, args...).Scan(dest...)
}

func (a myAdmin) ExecInTx(ctx context.Context, q string, args ...any) (func() error, error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return tx.Commit, nil
}

func (a myAdmin) ScriptInTx(ctx context.Context, stmts []string) (func() error, error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return tx.Commit, nil
}

func (a myAdmin) ExecScript(ctx context.Context, stmts []string) error {
	conn, err := a.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// myFence writes through Write on a client that sets CLIENT_FOUND_ROWS or
// not.
type myFence struct {
	db *sql.DB
	f  *simbamysql.Fence
}

func openMyFence(foundRows bool) func(raw, table string) (FenceConn, error) {
	return func(raw, table string) (FenceConn, error) {
		f, err := simbamysql.NewFence(simbamysql.FenceTable{Table: table, Key: "key", Token: "token", Columns: []string{"value"}})
		if err != nil {
			return nil, err
		}
		cfg, err := mysql.ParseDSN(raw)
		if err != nil {
			return nil, err
		}
		cfg.ClientFoundRows = foundRows
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		return myFence{sql.OpenDB(conn), f}, nil
	}
}

func (c myFence) Init(ctx context.Context, key string) error { return c.f.Init(ctx, c.db, key) }

func (c myFence) Write(ctx context.Context, key string, token uint64, value string) (bool, error) {
	return c.f.Write(ctx, c.db, key, token, value)
}

func (c myFence) InTx(ctx context.Context, commit bool, fn func(WriteFunc) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	err = fn(func(key string, token uint64, value string) (bool, error) {
		return c.f.Write(ctx, tx, key, token, value)
	})
	if err != nil || !commit {
		return err
	}
	return tx.Commit()
}

func (c myFence) Close() error { return c.db.Close() }

// myTLSServer returns the DSN of the TLS test server (its tls parameter
// names the configuration "custom") with its password, the password,
// and the CA; "custom" is registered with that CA.
func myTLSServer(t testing.TB) (dsn, password string, roots *x509.CertPool) {
	t.Helper()
	dsn, _, roots = backendtest.TLSServer(t, myTLSEnv)
	if err := mysql.RegisterTLSConfig("custom", &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatal(err)
	}
	cfg := myDSN(t, dsn)
	if cfg.Passwd == "" {
		t.Fatalf("%s has no password", myTLSEnv)
	}
	return dsn, cfg.Passwd, roots
}

// myTLSHarness is the harness whose URL keeps the DSN's tls parameter,
// which the driver keeps apart from the other parameters.
func myTLSHarness() Harness {
	h := myHarness()
	toURL := h.URL
	h.URL = func(t testing.TB, raw, addr string) string {
		s := toURL(t, raw, addr)
		name := myDSN(t, raw).TLSConfig
		if addr != "" || name == "" {
			return s
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("tls", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return h
}
