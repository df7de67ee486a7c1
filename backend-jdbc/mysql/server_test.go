package simbamysql

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	"github.com/simba-go/simba/backend-jdbc/internal/sqltest"
	"github.com/simba-go/simba/core/backendtest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("SIMBA_IN_TERM_HOLDER"); spec != "" {
		os.Exit(runInTermHolder(spec)) // a holder process of in_term_test.go
	}
	goleak.VerifyTestMain(m)
}

// TestServer runs the suite of the SQL backends on the MySQL or MariaDB
// server of SIMBA_TEST_MYSQL_URL, a go-sql-driver/mysql DSN.
func TestServer(t *testing.T) { sqltest.Run(t, harness()) }

// TestServerIsolation runs the tests whose statements depend on the
// isolation level again, with READ COMMITTED, then SERIALIZABLE, as the
// default of every connection (a session variable the DSN sets): the
// backend must not depend on the server's default, InnoDB's being
// REPEATABLE READ, which TestServer runs at.
func TestServerIsolation(t *testing.T) {
	for _, level := range []string{"READ-COMMITTED", "SERIALIZABLE"} {
		t.Run(level, func(t *testing.T) {
			h := harness()
			h.Server = func(t testing.TB, raw string) string { return withIsolation(t, raw, level) }
			h.Only = sqltest.IsolationTests
			sqltest.Run(t, h)
		})
	}
}

// withIsolation returns raw with a parameter that makes level the
// isolation of every connection's transactions, and checks that it does:
// transaction_isolation on MySQL 8 and MariaDB 11.1+, tx_isolation on
// earlier MariaDB.
func withIsolation(t testing.TB, raw, level string) string {
	t.Helper()
	for _, name := range []string{"transaction_isolation", "tx_isolation"} {
		cfg := parseDSN(t, raw)
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[name] = "'" + level + "'"
		dsn := cfg.FormatDSN()
		db := newDB(t, dsn, 1)
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

func BenchmarkServer(b *testing.B) { sqltest.Bench(b, harness()) }

func options(o sqlcore.Options) Options {
	return Options{TablePrefix: o.TablePrefix, Migrate: o.Migrate, CleanupInterval: o.CleanupInterval, Logger: o.Logger}
}

func parseDSN(t testing.TB, raw string) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(raw)
	if err != nil {
		t.Fatalf("SIMBA_TEST_MYSQL_URL: %v", err)
	}
	return cfg
}

// newDB returns a client of raw, closed when t ends.
func newDB(t testing.TB, raw string, maxConns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", raw)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func engineOn(db *sql.DB) func(sqlcore.Options) (*sqlcore.Backend, error) {
	return func(o sqlcore.Options) (*sqlcore.Backend, error) {
		b, err := New(db, options(o))
		if err != nil {
			return nil, err
		}
		return b.e, nil
	}
}

func harness() sqltest.Harness {
	return sqltest.Harness{
		Pkg:        pkg,
		EnvVar:     "SIMBA_TEST_MYSQL_URL",
		Migrations: migrations,
		OldSchema:  oldSchema,
		Connect: func(t testing.TB, raw string) (func(sqlcore.Options) (*sqlcore.Backend, error), sqltest.Admin) {
			db := newDB(t, raw, 0)
			return engineOn(db), admin{db}
		},
		Open: func(ctx context.Context, dataSource string, o sqltest.OpenOptions) (sqltest.Backend, error) {
			opts := options(o.Options)
			opts.Password = o.Password
			b, err := Open(ctx, dataSource, opts)
			if err != nil {
				return nil, err
			}
			return b, nil
		},
		// The server itself is reached through a mysql:// URL, and through
		// the test's proxies with a DSN: both forms Open takes connect.
		URL: func(t testing.TB, raw, addr string) string {
			cfg := parseDSN(t, raw)
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
		Addr: func(t testing.TB, raw string) string { return parseDSN(t, raw).Addr },
		// go-sql-driver never asks the server to cancel a statement.
		Uncancelled: func(t testing.TB, raw string, o sqlcore.Options) *sqlcore.Backend {
			b, err := engineOn(newDB(t, raw, 0))(o)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Later:     func(s int) string { return fmt.Sprintf("UTC_TIMESTAMP(6) + INTERVAL %d SECOND", s) },
		LockWaits: "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
		SingleConn: func(t testing.TB, raw string, o sqlcore.Options) (*sqlcore.Backend, func(context.Context) (int64, error)) {
			db := newDB(t, raw, 1)
			b, err := engineOn(db)(o)
			if err != nil {
				t.Fatal(err)
			}
			return b, func(ctx context.Context) (int64, error) {
				var id int64
				err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
				return id, err
			}
		},
		RowsRead: func(t testing.TB, raw string, o sqlcore.Options) (*sqlcore.Backend, func(context.Context) (int64, error)) {
			db := newDB(t, raw, 1)
			b, err := engineOn(db)(o)
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
		Kill: func(ctx context.Context, a sqltest.Admin, id int64) error {
			return a.Exec(ctx, fmt.Sprintf("KILL %d", id)) // KILL takes no placeholder; id is an integer
		},
		BeforeFirstInsert: func(t testing.TB, hook func()) {
			beforeInsert = hook
			t.Cleanup(func() { beforeInsert = nil })
		},
		Fences: []sqltest.FenceClient{{Name: "default", Open: openFence(false)}, {Name: "clientFoundRows", Open: openFence(true)}},
		Quote:  "`",
		Secrets: func(t testing.TB, raw string) sqltest.Secrets {
			cfg := parseDSN(t, raw)
			return sqltest.Secrets{
				Schemes: []string{"mysql"},
				Host:    cfg.Addr,
				DB:      "/" + cfg.DBName,
				Invalid: "?tls=nosuch",
				DSN:     true,
			}
		},
	}
}

// oldSchema is the tables as the versions before migration 2 created
// them.
var oldSchema = []string{
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

// admin runs the tests' statements on a client of their own.
type admin struct{ db *sql.DB }

func (a admin) Exec(ctx context.Context, q string, args ...any) error {
	_, err := a.db.ExecContext(ctx, q, args...)
	return err
}

func (a admin) Scan(ctx context.Context, q string, args []any, dest ...any) error {
	return a.db.QueryRowContext(ctx, q, args...).Scan(dest...)
}

func (a admin) ExecInTx(ctx context.Context, q string, args ...any) (func() error, error) {
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

func (a admin) ScriptInTx(ctx context.Context, stmts []string) (func() error, error) {
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

func (a admin) ExecScript(ctx context.Context, stmts []string) error {
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

// fence writes through Write on a client that sets CLIENT_FOUND_ROWS or
// not.
type fence struct {
	db *sql.DB
	f  *Fence
}

func openFence(foundRows bool) func(raw, table string) (sqltest.FenceConn, error) {
	return func(raw, table string) (sqltest.FenceConn, error) {
		f, err := NewFence(FenceTable{Table: table, Key: "key", Token: "token", Columns: []string{"value"}})
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
		return fence{sql.OpenDB(conn), f}, nil
	}
}

func (c fence) Init(ctx context.Context, key string) error { return c.f.Init(ctx, c.db, key) }

func (c fence) Write(ctx context.Context, key string, token uint64, value string) (bool, error) {
	return c.f.Write(ctx, c.db, key, token, value)
}

func (c fence) InTx(ctx context.Context, commit bool, fn func(sqltest.WriteFunc) error) error {
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

func (c fence) Close() error { return c.db.Close() }

// TestMigrateIgnoresDuplicateColumn: an ALTER TABLE that a concurrent
// migration made redundant, between the check of information_schema and
// the EXECUTE, fails with ER_DUP_FIELDNAME, which is what the step wanted.
func TestMigrateIgnoresDuplicateColumn(t *testing.T) {
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL")
	db := newDB(t, raw, 0)
	table := "t_dupcol_" + fmt.Sprint(time.Now().UnixNano())
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+table+" (id INT, identity VARCHAR(256) NOT NULL DEFAULT '')"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
	d := newDialect(db, sqlcore.NewTables("unused_"))
	alter := "ALTER TABLE " + table + " ADD COLUMN identity VARCHAR(256) NOT NULL DEFAULT ''"
	if err := d.Migrate(t.Context(), []string{alter}); err != nil {
		t.Fatalf("Migrate with a column that exists: %v", err)
	}
	if err := d.Migrate(t.Context(), []string{"ALTER TABLE " + table + " ADD COLUMN bad TYPO"}); err == nil {
		t.Fatal("Migrate ignored another error")
	}
}
