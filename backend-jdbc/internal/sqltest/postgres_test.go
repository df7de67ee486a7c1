package sqltest

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
)

// TestPostgres runs the suite on the PostgreSQL server of
// SIMBA_TEST_POSTGRES_URL.
func TestPostgres(t *testing.T) { Run(t, pgHarness()) }

// TestPostgresIsolation runs the tests whose statements depend on the
// isolation level again at the levels a user may make the default
// (default_transaction_isolation, a run-time parameter of the URL): the
// statements are written for READ COMMITTED, PostgreSQL's default.
func TestPostgresIsolation(t *testing.T) {
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			h := pgHarness()
			h.Server = func(t testing.TB, raw string) string {
				u := pgURL(t, raw)
				q := u.Query()
				q.Set("default_transaction_isolation", level)
				u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // a space pgx reads as one
				return u.String()
			}
			h.Only = IsolationTests
			Run(t, h)
		})
	}
}

// TestPostgresTLS runs the conformance suite over TLS, as the
// scram-sha-256 user of SIMBA_TEST_POSTGRES_TLS_URL (sslmode=verify-full
// with sslrootcert).
func TestPostgresTLS(t *testing.T) {
	h := pgHarness()
	h.EnvVar = "SIMBA_TEST_POSTGRES_TLS_URL"
	h.Only = TLSTests
	Run(t, h)
}

func BenchmarkPostgres(b *testing.B) { Bench(b, pgHarness()) }

func pgOptions(o sqlcore.Options) simbapg.Options {
	return simbapg.Options{TablePrefix: o.TablePrefix, Migrate: o.Migrate, CleanupInterval: o.CleanupInterval, Logger: o.Logger}
}

// newPool returns a pool on raw, closed when t ends.
func pgPool(t testing.TB, raw string, maxConns int32) *pgxpool.Pool {
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

// pgUncancelledPool returns a pool on raw whose cancel requests are lost:
// a connection whose ctx ends is closed, and the server goes on with its
// statement.
func pgUncancelledPool(t testing.TB, raw string) *pgxpool.Pool {
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

// pgBackends returns New on pool.
func pgBackends(pool *pgxpool.Pool) func(sqlcore.Options) (Backend, error) {
	return func(o sqlcore.Options) (Backend, error) {
		b, err := simbapg.New(pool, pgOptions(o))
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// pgHarness is the harness of the PostgreSQL server of
// SIMBA_TEST_POSTGRES_URL.
func pgHarness() Harness {
	return Harness{
		Pkg: &sqlcore.Pkg{Name: "simbapg", ErrClosed: simbapg.ErrClosed, ErrSchemaMissing: simbapg.ErrSchemaMissing,
			ErrInvalidOptions: simbapg.ErrInvalidOptions, ErrInvalidFence: simbapg.ErrInvalidFence, ErrFenceRowMissing: simbapg.ErrFenceRowMissing},
		EnvVar:    "SIMBA_TEST_POSTGRES_URL",
		Schema:    simbapg.Schema,
		OldSchema: pgOldSchema,
		Connect: func(t testing.TB, raw string) (func(sqlcore.Options) (Backend, error), Admin) {
			pool := pgPool(t, raw, 0)
			return pgBackends(pool), pgAdmin{pool}
		},
		Open: func(ctx context.Context, url string, o OpenOptions) (Backend, error) {
			opts := pgOptions(o.Options)
			opts.Password = o.Password
			b, err := simbapg.Open(ctx, url, opts)
			if err != nil {
				return nil, err
			}
			return b, nil
		},
		URL: func(t testing.TB, raw, addr string) string {
			if addr == "" {
				return raw
			}
			u := pgURL(t, raw)
			u.Host = addr
			return u.String()
		},
		Addr:      func(t testing.TB, raw string) string { return pgURL(t, raw).Host },
		Later:     func(s int) string { return fmt.Sprintf("clock_timestamp() + interval '%d second'", s) },
		LockWaits: "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE ? AND pid <> pg_backend_pid()",
		SingleConn: func(t testing.TB, raw string, o sqlcore.Options) (Backend, func(context.Context) (int64, error)) {
			pool := pgPool(t, raw, 1)
			b, err := pgBackends(pool)(o)
			if err != nil {
				t.Fatal(err)
			}
			return b, func(ctx context.Context) (int64, error) {
				var pid int32
				err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
				return int64(pid), err
			}
		},
		RowsRead: func(t testing.TB, raw string, o sqlcore.Options) (Backend, func(context.Context) (int64, error)) {
			pool := pgPool(t, raw, 1)
			b, err := pgBackends(pool)(o)
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
		Uncancelled: func(t testing.TB, raw string, o sqlcore.Options) Backend {
			b, err := pgBackends(pgUncancelledPool(t, raw))(o)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Kill: func(ctx context.Context, a Admin, id int64) error {
			var ok bool
			err := a.Scan(ctx, "SELECT pg_terminate_backend(?)", []any{int32(id)}, &ok)
			if err == nil && !ok {
				err = fmt.Errorf("backend %d not terminated", id)
			}
			return err
		},
		Fences: []FenceClient{{Name: "pgx", Open: openPgxFence}, {Name: "database-sql", Open: openPgSQLFence}},
		Quote:  `"`,
		Secrets: func(t testing.TB, raw string) Secrets {
			return Secrets{
				Schemes: []string{"postgres", "postgresql"},
				Host:    pgURL(t, raw).Host,
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

// pgOldSchema is the tables as the versions before migration 2 created
// them.
var pgOldSchema = []string{
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

func pgURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("SIMBA_TEST_POSTGRES_URL: %v", err)
	}
	return u
}

// pgAdmin runs the tests' statements on a pool of their own.
type pgAdmin struct{ pool *pgxpool.Pool }

func (a pgAdmin) Exec(ctx context.Context, q string, args ...any) error {
	_, err := a.pool.Exec(ctx, Dollars(q), args...)
	return err
}

func (a pgAdmin) Scan(ctx context.Context, q string, args []any, dest ...any) error {
	return a.pool.QueryRow(ctx, Dollars(q), args...).Scan(dest...)
}

func (a pgAdmin) ExecInTx(ctx context.Context, q string, args ...any) (func() error, error) {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, Dollars(q), args...); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return func() error { return tx.Commit(ctx) }, nil
}

func (a pgAdmin) ExecScript(ctx context.Context, stmts []string) error {
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

func pgFenceOf(table string) (*simbapg.Fence, error) {
	return simbapg.NewFence(simbapg.FenceTable{Table: table, Key: "key", Token: "token", Columns: []string{"value"}})
}

// pgxFence writes through WritePgx on a pool.
type pgxFence struct {
	pool *pgxpool.Pool
	f    *simbapg.Fence
}

func openPgxFence(raw, table string) (FenceConn, error) {
	f, err := pgFenceOf(table)
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

func (c pgxFence) InTx(ctx context.Context, commit bool, fn func(WriteFunc) error) error {
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

// pgSQLFence writes through Write on a *sql.DB of the pgx stdlib driver.
type pgSQLFence struct {
	db *sql.DB
	f  *simbapg.Fence
}

func openPgSQLFence(raw, table string) (FenceConn, error) {
	f, err := pgFenceOf(table)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	return pgSQLFence{stdlib.OpenDB(*cfg), f}, nil
}

func (c pgSQLFence) Init(ctx context.Context, key string) error { return c.f.Init(ctx, c.db, key) }

func (c pgSQLFence) Write(ctx context.Context, key string, token uint64, value string) (bool, error) {
	return c.f.Write(ctx, c.db, key, token, value)
}

func (c pgSQLFence) InTx(ctx context.Context, commit bool, fn func(WriteFunc) error) error {
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

func (c pgSQLFence) Close() error { return c.db.Close() }
