package simbasql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/simba-go/simba/core/fencingtest"
)

func TestNewFence(t *testing.T) {
	good := FenceTable{Table: "ledger_state", Key: "id", Token: "fencing_token", Columns: []string{"last_batch"}}
	with := func(change func(*FenceTable)) FenceTable {
		t := good
		t.Columns = append([]string(nil), good.Columns...)
		change(&t)
		return t
	}
	tests := []struct {
		name    string
		dialect Dialect
		give    FenceTable
		wantErr string // empty: NewFence succeeds
	}{
		{name: "postgres", dialect: Postgres, give: good},
		{name: "mysql", dialect: MySQL, give: good},
		{name: "schema", dialect: Postgres, give: with(func(t *FenceTable) { t.Table = "ledger.state" })},
		{name: "no columns", dialect: MySQL, give: with(func(t *FenceTable) { t.Columns = nil })},
		{name: "unknown dialect", dialect: "oracle", give: good, wantErr: `dialect "oracle"`},
		{name: "empty table", dialect: Postgres, give: with(func(t *FenceTable) { t.Table = "" }), wantErr: `Table ""`},
		{name: "injection", dialect: Postgres, give: with(func(t *FenceTable) { t.Table = "t; DROP TABLE x" }), wantErr: "not a plain identifier"},
		{name: "quote", dialect: MySQL, give: with(func(t *FenceTable) { t.Key = "id`" }), wantErr: "Key"},
		{name: "two dots", dialect: Postgres, give: with(func(t *FenceTable) { t.Table = "a.b.c" }), wantErr: `Table "b.c"`},
		{name: "empty schema", dialect: Postgres, give: with(func(t *FenceTable) { t.Table = ".state" }), wantErr: `Table ""`},
		{name: "leading digit", dialect: Postgres, give: with(func(t *FenceTable) { t.Token = "1token" }), wantErr: "Token"},
		{name: "too long", dialect: Postgres, give: with(func(t *FenceTable) { t.Columns = []string{strings.Repeat("c", 64)} }), wantErr: "Columns[0]"},
		{name: "token is key", dialect: Postgres, give: with(func(t *FenceTable) { t.Token = "id" }), wantErr: `Token "id" is also Key`},
		{name: "column is token", dialect: MySQL, give: with(func(t *FenceTable) { t.Columns = []string{"FENCING_TOKEN"} }), wantErr: "is also Token"},
		{name: "column twice", dialect: Postgres, give: with(func(t *FenceTable) { t.Columns = []string{"a", "b", "a"} }), wantErr: `Columns[2] "a" is also Columns[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFence(tt.dialect, tt.give)
			if tt.wantErr == "" {
				if err != nil || f == nil {
					t.Fatalf("NewFence = %v, %v; want a fence", f, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidFence) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewFence error = %v; want ErrInvalidFence saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestFenceStatements(t *testing.T) {
	table := FenceTable{Table: "ledger.state", Key: "key", Token: "token", Columns: []string{"a", "b"}}
	tests := []struct {
		dialect                     Dialect
		wantUpdate, wantCur, wantIn string
	}{
		{
			dialect:    Postgres,
			wantUpdate: `UPDATE "ledger"."state" SET "a" = $1, "b" = $2, "token" = $3 WHERE "key" = $4 AND "token" <= $3`,
			wantCur:    `SELECT "token" FROM "ledger"."state" WHERE "key" = $1 FOR UPDATE`,
			wantIn:     `INSERT INTO "ledger"."state" ("key", "token") VALUES ($1, 0) ON CONFLICT DO NOTHING`,
		},
		{
			dialect:    MySQL,
			wantUpdate: "UPDATE `ledger`.`state` SET `a` = ?, `b` = ?, `token` = ? WHERE `key` = ? AND `token` <= ?",
			wantCur:    "SELECT `token` FROM `ledger`.`state` WHERE `key` = ? FOR UPDATE",
			wantIn:     "INSERT INTO `ledger`.`state` (`key`, `token`) VALUES (?, 0) ON DUPLICATE KEY UPDATE `key` = `key`",
		},
	}
	for _, tt := range tests {
		t.Run(string(tt.dialect), func(t *testing.T) {
			f, err := NewFence(tt.dialect, table)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ what, got, want string }{
				{"update", f.update, tt.wantUpdate}, {"current", f.current, tt.wantCur}, {"insert", f.insert, tt.wantIn},
			} {
				if c.got != c.want {
					t.Errorf("%s:\n got %s\nwant %s", c.what, c.got, c.want)
				}
			}
		})
	}
}

func TestFenceRefusesBadArguments(t *testing.T) {
	pg, err := NewFence(Postgres, FenceTable{Table: "t", Key: "k", Token: "tok", Columns: []string{"v"}})
	if err != nil {
		t.Fatal(err)
	}
	my, err := NewFence(MySQL, FenceTable{Table: "t", Key: "k", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	// No statement reaches the handles: they would panic if one did.
	var db *sql.DB
	var pool *pgxpool.Pool
	ctx := t.Context()
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"token above int64", func() error { _, err := pg.Write(ctx, db, "k", math.MaxInt64+1, "v"); return err }, "does not fit a BIGINT"},
		{"too few values", func() error { _, err := pg.Write(ctx, db, "k", 1); return err }, "0 values for 1 columns"},
		{"too many values", func() error { _, err := my.Write(ctx, db, "k", 1, "v"); return err }, "1 values for 0 columns"},
		{"pgx on mysql", func() error { _, err := my.WritePgx(ctx, pool, "k", 1); return err }, "PostgreSQL only"},
		{"pgx init on mysql", func() error { return my.InitPgx(ctx, pool, "k") }, "PostgreSQL only"},
		{"nil handle", func() error { _, err := pg.Write(ctx, nil, "k", 1, "v"); return err }, "nil database handle"},
		{"nil pgx handle", func() error { return pg.InitPgx(ctx, nil, "k") }, "nil database handle"},
		{"nil init handle", func() error { return pg.Init(ctx, nil, "k") }, "nil database handle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, ErrInvalidFence) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v; want ErrInvalidFence saying %q", err, tt.want)
			}
		})
	}
}

// fenceConn is one way of reaching a test server with a Fence: a client
// (pool or *sql.DB) and the Fence methods that take it.
type fenceConn interface {
	init(ctx context.Context, f *Fence, key any) error
	write(ctx context.Context, f *Fence, key any, token uint64, values ...any) (bool, error)
	// tx runs fn in a transaction, committed when commit is set and fn
	// succeeds, rolled back otherwise.
	tx(ctx context.Context, commit bool, fn func(write writeFunc) error) error
	// row reads the token and value of key in the test table.
	row(ctx context.Context, table, key string) (uint64, string, error)
	exec(ctx context.Context, q string) error
	Close() error
}

type writeFunc func(f *Fence, key any, token uint64, values ...any) (bool, error)

// fenceClient names a test server, a client kind and how to open one.
type fenceClient struct {
	name    string
	dialect Dialect
	envVar  string
	open    func(raw string) (fenceConn, error)
}

var fenceClients = []fenceClient{
	{"postgres-pgx", Postgres, "SIMBA_TEST_POSTGRES_URL", openPgxFenceConn},
	{"postgres-database-sql", Postgres, "SIMBA_TEST_POSTGRES_URL", openStdlibFenceConn},
	{"mysql", MySQL, "SIMBA_TEST_MYSQL_URL", openMySQLFenceConn(false)},
	{"mysql-clientFoundRows", MySQL, "SIMBA_TEST_MYSQL_URL", openMySQLFenceConn(true)},
}

type pgxFenceConn struct{ pool *pgxpool.Pool }

func openPgxFenceConn(raw string) (fenceConn, error) {
	pool, err := pgxpool.New(context.Background(), raw)
	if err != nil {
		return nil, err
	}
	return pgxFenceConn{pool}, nil
}

func (c pgxFenceConn) init(ctx context.Context, f *Fence, key any) error {
	return f.InitPgx(ctx, c.pool, key)
}

func (c pgxFenceConn) write(ctx context.Context, f *Fence, key any, token uint64, values ...any) (bool, error) {
	return f.WritePgx(ctx, c.pool, key, token, values...)
}

func (c pgxFenceConn) tx(ctx context.Context, commit bool, fn func(writeFunc) error) error {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	err = fn(func(f *Fence, key any, token uint64, values ...any) (bool, error) {
		return f.WritePgx(ctx, tx, key, token, values...)
	})
	if err != nil || !commit {
		return err
	}
	return tx.Commit(ctx)
}

func (c pgxFenceConn) row(ctx context.Context, table, key string) (uint64, string, error) {
	var token int64
	var value string
	err := c.pool.QueryRow(ctx, `SELECT "token", COALESCE("value", '') FROM "`+table+`" WHERE "key" = $1`, key).Scan(&token, &value)
	return uint64(token), value, err
}

func (c pgxFenceConn) exec(ctx context.Context, q string) error {
	_, err := c.pool.Exec(ctx, q)
	return err
}

func (c pgxFenceConn) Close() error {
	c.pool.Close()
	return nil
}

// sqlFenceConn is a database/sql client of either dialect.
type sqlFenceConn struct {
	db      *sql.DB
	dialect Dialect
}

func openStdlibFenceConn(raw string) (fenceConn, error) {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	return sqlFenceConn{stdlib.OpenDB(*cfg), Postgres}, nil
}

func openMySQLFenceConn(foundRows bool) func(string) (fenceConn, error) {
	return func(raw string) (fenceConn, error) {
		cfg, err := mysql.ParseDSN(raw)
		if err != nil {
			return nil, err
		}
		cfg.ClientFoundRows = foundRows
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		return sqlFenceConn{sql.OpenDB(conn), MySQL}, nil
	}
}

func (c sqlFenceConn) init(ctx context.Context, f *Fence, key any) error {
	return f.Init(ctx, c.db, key)
}

func (c sqlFenceConn) write(ctx context.Context, f *Fence, key any, token uint64, values ...any) (bool, error) {
	return f.Write(ctx, c.db, key, token, values...)
}

func (c sqlFenceConn) tx(ctx context.Context, commit bool, fn func(writeFunc) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	err = fn(func(f *Fence, key any, token uint64, values ...any) (bool, error) {
		return f.Write(ctx, tx, key, token, values...)
	})
	if err != nil || !commit {
		return err
	}
	return tx.Commit()
}

func (c sqlFenceConn) row(ctx context.Context, table, key string) (uint64, string, error) {
	q := `SELECT "token", COALESCE("value", '') FROM "` + table + `" WHERE "key" = $1`
	if c.dialect == MySQL {
		q = "SELECT `token`, COALESCE(`value`, '') FROM `" + table + "` WHERE `key` = ?"
	}
	var token int64
	var value string
	err := c.db.QueryRowContext(ctx, q, key).Scan(&token, &value)
	return uint64(token), value, err
}

func (c sqlFenceConn) exec(ctx context.Context, q string) error {
	_, err := c.db.ExecContext(ctx, q)
	return err
}

func (c sqlFenceConn) Close() error { return c.db.Close() }

// fenceFixture is a test table on one client kind's server, dropped when
// the test ends. Its columns are named key, token and value, words that
// MySQL or PostgreSQL reserve, so the fence's quoting is exercised.
type fenceFixture struct {
	client fenceClient
	raw    string
	conn   fenceConn
	table  string
	fence  *Fence
	keys   atomic.Int64
}

func newFenceFixture(t testing.TB, c fenceClient) *fenceFixture {
	t.Helper()
	raw := serverEnv(t, c.envVar)
	conn, err := c.open(raw)
	if err != nil {
		t.Fatalf("open %s: %v", c.name, err)
	}
	t.Cleanup(func() { conn.Close() })
	x := &fenceFixture{client: c, raw: raw, conn: conn, table: "fence_" + strings.TrimSuffix(uniquePrefix(), "_")}
	ddl := `CREATE TABLE "` + x.table + `" ("key" varchar(64) PRIMARY KEY, "token" bigint NOT NULL DEFAULT 0, "value" text)`
	if c.dialect == MySQL {
		ddl = "CREATE TABLE `" + x.table + "` (`key` VARCHAR(64) PRIMARY KEY, `token` BIGINT NOT NULL DEFAULT 0, `value` TEXT) ENGINE=InnoDB"
	}
	if err := conn.exec(ctxT(t), ddl); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		drop := `DROP TABLE IF EXISTS "` + x.table + `"`
		if c.dialect == MySQL {
			drop = "DROP TABLE IF EXISTS `" + x.table + "`"
		}
		if err := conn.exec(context.Background(), drop); err != nil {
			t.Logf("drop %s: %v", x.table, err)
		}
	})
	x.fence, err = NewFence(c.dialect, FenceTable{Table: x.table, Key: "key", Token: "token", Columns: []string{"value"}})
	if err != nil {
		t.Fatalf("NewFence: %v", err)
	}
	return x
}

// newKey returns a key no other row of the table has, its row created.
func (x *fenceFixture) newKey(t testing.TB) string {
	t.Helper()
	key := fmt.Sprintf("k%d", x.keys.Add(1))
	if err := x.conn.init(ctxT(t), x.fence, key); err != nil {
		t.Fatalf("Init(%s): %v", key, err)
	}
	return key
}

// fenceResource adapts one row of a fixture to the fencing test kit; every
// handle has its own client, so Reopen reads the row over new connections.
type fenceResource struct {
	x    *fenceFixture
	conn fenceConn
	key  string
}

func (r *fenceResource) Write(ctx context.Context, token uint64, value string) (bool, error) {
	return r.conn.write(ctx, r.x.fence, r.key, token, value)
}

func (r *fenceResource) State(ctx context.Context) (uint64, string, error) {
	return r.conn.row(ctx, r.x.table, r.key)
}

func (r *fenceResource) Reopen(context.Context) (fencingtest.Resource, error) {
	conn, err := r.x.client.open(r.x.raw)
	if err != nil {
		return nil, err
	}
	return &fenceResource{x: r.x, conn: conn, key: r.key}, nil
}

func (r *fenceResource) Close() error { return r.conn.Close() }

// TestFencePassesKit runs the fencing test kit on both servers, through
// pgx and database/sql on PostgreSQL and with and without CLIENT_FOUND_ROWS
// on MySQL (R-FEN-2).
func TestFencePassesKit(t *testing.T) {
	for _, c := range fenceClients {
		t.Run(c.name, func(t *testing.T) {
			x := newFenceFixture(t, c)
			fencingtest.Run(t, func(t testing.TB) fencingtest.Resource {
				conn, err := c.open(x.raw)
				if err != nil {
					t.Fatalf("open %s: %v", c.name, err)
				}
				return &fenceResource{x: x, conn: conn, key: x.newKey(t)}
			})
		})
	}
}

func TestFenceRowMissing(t *testing.T) {
	for _, c := range fenceClients {
		t.Run(c.name, func(t *testing.T) {
			x := newFenceFixture(t, c)
			ok, err := x.conn.write(ctxT(t), x.fence, "never-created", 1, "v")
			if ok || !errors.Is(err, ErrFenceRowMissing) {
				t.Errorf("Write to a missing row = %t, %v; want ErrFenceRowMissing", ok, err)
			}
			key := x.newKey(t)
			if err := x.conn.init(ctxT(t), x.fence, key); err != nil {
				t.Errorf("second Init of %s: %v", key, err)
			}
		})
	}
}

// TestFenceInTransaction checks the pattern the Fence doc recommends: a
// fenced write first in a transaction fences the whole transaction, and
// rolls back with it.
func TestFenceInTransaction(t *testing.T) {
	for _, c := range fenceClients {
		t.Run(c.name, func(t *testing.T) {
			x := newFenceFixture(t, c)
			ctx := ctxT(t)
			key := x.newKey(t)
			// outcome says what is wrong when a write did not end as wanted.
			outcome := func(what string, want, ok bool, err error) error {
				switch {
				case err != nil:
					return fmt.Errorf("%s = %t, %w; want %t", what, ok, err, want)
				case ok != want:
					return fmt.Errorf("%s = %t, <nil>; want %t", what, ok, want)
				}
				return nil
			}
			write := func(token uint64, value string, want bool) error {
				ok, err := x.conn.write(ctx, x.fence, key, token, value)
				return outcome(fmt.Sprintf("Write(%d, %q)", token, value), want, ok, err)
			}
			if err := write(3, "term-3", true); err != nil {
				t.Fatal(err)
			}

			// A transaction of term 5 that rolls back leaves token 3.
			err := x.conn.tx(ctx, false, func(txWrite writeFunc) error {
				ok, err := txWrite(x.fence, key, 5, "term-5 rolled back")
				return outcome("token 5 in the transaction", true, ok, err)
			})
			if err == nil {
				err = write(4, "term-4", true)
			}
			if err != nil {
				t.Fatal(err)
			}

			// A transaction of term 6 holds the row until it commits; a
			// concurrent term-5 write then compares with 6 and is refused.
			late := make(chan error, 1)
			err = x.conn.tx(ctx, true, func(txWrite writeFunc) error {
				ok, err := txWrite(x.fence, key, 6, "term-6")
				if err := outcome("token 6 in the transaction", true, ok, err); err != nil {
					late <- nil
					return err
				}
				go func() { late <- write(5, "term-5 late", false) }()
				ok, err = txWrite(x.fence, key, 6, "term-6 second step")
				return outcome("token 6 for the second step", true, ok, err)
			})
			if lateErr := <-late; lateErr != nil {
				t.Error(lateErr)
			}
			if err != nil {
				t.Fatal(err)
			}
			token, value, err := x.conn.row(ctx, x.table, key)
			if err != nil || token != 6 || value != "term-6 second step" {
				t.Errorf("row = (%d, %q), %v; want (6, %q)", token, value, err, "term-6 second step")
			}
		})
	}
}

func ExampleFence() {
	// Once, at start-up: the fence of the ledger_state table.
	fence, err := NewFence(Postgres, FenceTable{
		Table:   "ledger_state",
		Key:     "id",
		Token:   "fencing_token",
		Columns: []string{"last_batch"},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL")) // the pgx stdlib driver
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := fence.Init(ctx, db, 1); err != nil {
		log.Fatal(err)
	}

	// In the leader's work, with the token of its term.
	var token uint64 = 8 // term.Token()
	ok, err := fence.Write(ctx, db, 1, token, "batch-42")
	switch {
	case err != nil:
		log.Printf("outcome unknown, retry with the same token: %v", err)
	case !ok:
		log.Print("a newer term has written: this node is no longer the leader")
	}
}
