package simbapg

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	"github.com/simba-go/simba/backend-jdbc/internal/sqltest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("SIMBA_IN_TERM_HOLDER"); spec != "" {
		os.Exit(runInTermHolder(spec)) // a holder process of in_term_test.go
	}
	goleak.VerifyTestMain(m)
}

// TestServer runs the suite of the SQL backends on the PostgreSQL server
// of SIMBA_TEST_POSTGRES_URL.
func TestServer(t *testing.T) { sqltest.Run(t, harness()) }

// TestServerIsolation runs the tests whose statements depend on the
// isolation level again at the levels a user may make the default
// (default_transaction_isolation, a run-time parameter of the URL): the
// statements are written for READ COMMITTED, PostgreSQL's default.
func TestServerIsolation(t *testing.T) {
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			h := harness()
			h.Server = func(t testing.TB, raw string) string {
				u, err := url.Parse(raw)
				if err != nil {
					t.Fatalf("SIMBA_TEST_POSTGRES_URL: %v", err)
				}
				q := u.Query()
				q.Set("default_transaction_isolation", level)
				u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // a space pgx reads as one
				return u.String()
			}
			h.Only = sqltest.IsolationTests
			sqltest.Run(t, h)
		})
	}
}

func BenchmarkServer(b *testing.B) { sqltest.Bench(b, harness()) }

func options(o sqlcore.Options) Options {
	return Options{TablePrefix: o.TablePrefix, Migrate: o.Migrate, CleanupInterval: o.CleanupInterval, Logger: o.Logger}
}

// newPool returns a pool on raw, closed when t ends.
func newPool(t testing.TB, raw string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		cfg.MaxConns, cfg.MinConns = maxConns, 0
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// uncancelledPool returns a pool on raw whose cancel requests are lost:
// a connection whose ctx ends is closed, and the server goes on with its
// statement.
func uncancelledPool(t testing.TB, raw string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lossyCancel{Conn: c}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// lossyCancel is a connection that drops a cancel request written to it
// (16 bytes: the length, then the code 80877102) and sends the rest.
type lossyCancel struct{ net.Conn }

func (c *lossyCancel) Write(p []byte) (int, error) {
	if len(p) == 16 && binary.BigEndian.Uint32(p) == 16 && binary.BigEndian.Uint32(p[4:]) == 80877102 {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func engineOn(pool *pgxpool.Pool) func(sqlcore.Options) (*sqlcore.Backend, error) {
	return func(o sqlcore.Options) (*sqlcore.Backend, error) {
		b, err := New(pool, options(o))
		if err != nil {
			return nil, err
		}
		return b.e, nil
	}
}

func harness() sqltest.Harness {
	return sqltest.Harness{
		Pkg:        pkg,
		EnvVar:     "SIMBA_TEST_POSTGRES_URL",
		Migrations: migrations,
		OldSchema:  oldSchema,
		Connect: func(t testing.TB, raw string) (func(sqlcore.Options) (*sqlcore.Backend, error), sqltest.Admin) {
			pool := newPool(t, raw, 0)
			return engineOn(pool), admin{pool}
		},
		Open: func(ctx context.Context, url string, o sqltest.OpenOptions) (sqltest.Backend, error) {
			opts := options(o.Options)
			opts.Password = o.Password
			b, err := Open(ctx, url, opts)
			if err != nil {
				return nil, err
			}
			return b, nil
		},
		URL: func(t testing.TB, raw, addr string) string {
			if addr == "" {
				return raw
			}
			u := parseURL(t, raw)
			u.Host = addr
			return u.String()
		},
		Addr:      func(t testing.TB, raw string) string { return parseURL(t, raw).Host },
		Later:     func(s int) string { return fmt.Sprintf("clock_timestamp() + interval '%d second'", s) },
		LockWaits: "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE ? AND pid <> pg_backend_pid()",
		SingleConn: func(t testing.TB, raw string, o sqlcore.Options) (*sqlcore.Backend, func(context.Context) (int64, error)) {
			pool := newPool(t, raw, 1)
			b, err := engineOn(pool)(o)
			if err != nil {
				t.Fatal(err)
			}
			return b, func(ctx context.Context) (int64, error) {
				var pid int32
				err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
				return int64(pid), err
			}
		},
		RowsRead: func(t testing.TB, raw string, o sqlcore.Options) (*sqlcore.Backend, func(context.Context) (int64, error)) {
			pool := newPool(t, raw, 1)
			b, err := engineOn(pool)(o)
			if err != nil {
				t.Fatal(err)
			}
			return b, func(ctx context.Context) (int64, error) {
				// The connection's statistics reach the shared ones when
				// a transaction ends, at most once a second unless forced:
				// this statement forces the flush of the ones before it.
				if _, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
					return 0, err
				}
				var n int64
				err := pool.QueryRow(ctx, `SELECT
    coalesce((SELECT sum(seq_tup_read) FROM pg_stat_user_tables WHERE left(relname, length($1)) = $1), 0) +
    coalesce((SELECT sum(idx_tup_read) FROM pg_stat_user_indexes WHERE left(relname, length($1)) = $1), 0)`,
					o.TablePrefix).Scan(&n)
				return n, err
			}
		},
		Uncancelled: func(t testing.TB, raw string, o sqlcore.Options) *sqlcore.Backend {
			b, err := engineOn(uncancelledPool(t, raw))(o)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Kill: func(ctx context.Context, a sqltest.Admin, id int64) error {
			var ok bool
			err := a.Scan(ctx, "SELECT pg_terminate_backend(?)", []any{int32(id)}, &ok)
			if err == nil && !ok {
				err = fmt.Errorf("backend %d not terminated", id)
			}
			return err
		},
		Fences: []sqltest.FenceClient{{Name: "pgx", Open: openPgxFence}, {Name: "database-sql", Open: openSQLFence}},
		Quote:  `"`,
		Secrets: func(t testing.TB, raw string) sqltest.Secrets {
			return sqltest.Secrets{
				Schemes: []string{"postgres", "postgresql"},
				Host:    parseURL(t, raw).Host,
				DB:      "/postgres?sslmode=disable",
				Invalid: "?sslmode=bogus",
				HoldsConfig: func(err error) bool {
					var ce *pgconn.ConnectError
					var pe *pgconn.ParseConfigError
					return errors.As(err, &ce) || errors.As(err, &pe)
				},
			}
		},
	}
}

// oldSchema is the tables as the versions before migration 2 created
// them.
var oldSchema = []string{
	`CREATE TABLE IF NOT EXISTS {session} (
    id         varchar(32) COLLATE "C" PRIMARY KEY,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)`,
	`CREATE INDEX IF NOT EXISTS {p}session_exp ON {session} (expires_at)`,
	`CREATE TABLE IF NOT EXISTS {lease} (
    name        varchar(128) COLLATE "C" PRIMARY KEY,
    session_id  varchar(32) COLLATE "C",
    token       bigint NOT NULL CHECK (token > 0),
    acquired_at timestamptz NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS {p}lease_sid ON {lease} (session_id)`,
	`CREATE TABLE IF NOT EXISTS {member} (
    group_name varchar(128) COLLATE "C" NOT NULL,
    session_id varchar(32) COLLATE "C" NOT NULL,
    joined_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, session_id)
)`,
	`CREATE INDEX IF NOT EXISTS {p}member_sid ON {member} (session_id)`,
}

func parseURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("SIMBA_TEST_POSTGRES_URL: %v", err)
	}
	return u
}

// admin runs the tests' statements on a pool of their own.
type admin struct{ pool *pgxpool.Pool }

func (a admin) Exec(ctx context.Context, q string, args ...any) error {
	_, err := a.pool.Exec(ctx, sqltest.Dollars(q), args...)
	return err
}

func (a admin) Scan(ctx context.Context, q string, args []any, dest ...any) error {
	return a.pool.QueryRow(ctx, sqltest.Dollars(q), args...).Scan(dest...)
}

func (a admin) ExecInTx(ctx context.Context, q string, args ...any) (func() error, error) {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, sqltest.Dollars(q), args...); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return func() error { return tx.Commit(ctx) }, nil
}

func (a admin) ExecScript(ctx context.Context, stmts []string) error {
	conn, err := a.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func testFence(table string) (*Fence, error) {
	return NewFence(FenceTable{Table: table, Key: "key", Token: "token", Columns: []string{"value"}})
}

// pgxFence writes through WritePgx on a pool.
type pgxFence struct {
	pool *pgxpool.Pool
	f    *Fence
}

func openPgxFence(raw, table string) (sqltest.FenceConn, error) {
	f, err := testFence(table)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(context.Background(), raw)
	if err != nil {
		return nil, err
	}
	return pgxFence{pool, f}, nil
}

func (c pgxFence) Init(ctx context.Context, key string) error { return c.f.InitPgx(ctx, c.pool, key) }

func (c pgxFence) Write(ctx context.Context, key string, token uint64, value string) (bool, error) {
	return c.f.WritePgx(ctx, c.pool, key, token, value)
}

func (c pgxFence) InTx(ctx context.Context, commit bool, fn func(sqltest.WriteFunc) error) error {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	err = fn(func(key string, token uint64, value string) (bool, error) {
		return c.f.WritePgx(ctx, tx, key, token, value)
	})
	if err != nil || !commit {
		return err
	}
	return tx.Commit(ctx)
}

func (c pgxFence) Close() error {
	c.pool.Close()
	return nil
}

// sqlFence writes through Write on a *sql.DB of the pgx stdlib driver.
type sqlFence struct {
	db *sql.DB
	f  *Fence
}

func openSQLFence(raw, table string) (sqltest.FenceConn, error) {
	f, err := testFence(table)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	return sqlFence{stdlib.OpenDB(*cfg), f}, nil
}

func (c sqlFence) Init(ctx context.Context, key string) error { return c.f.Init(ctx, c.db, key) }

func (c sqlFence) Write(ctx context.Context, key string, token uint64, value string) (bool, error) {
	return c.f.Write(ctx, c.db, key, token, value)
}

func (c sqlFence) InTx(ctx context.Context, commit bool, fn func(sqltest.WriteFunc) error) error {
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

func (c sqlFence) Close() error { return c.db.Close() }
