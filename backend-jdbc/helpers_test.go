package simbasql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	simba "github.com/simba-go/simba/core"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// serverEnv returns the value of the variable naming a test server. Without
// it the test is skipped, except under CI, where it fails: CI never passes
// by skipping.
func serverEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set (CI is set, so this test must run): eval \"$(tools/testenv/up)\"", name)
		}
		t.Skipf("%s is not set: eval \"$(tools/testenv/up)\" to run against a real server", name)
	}
	return v
}

// dialectEnv describes how the tests reach one dialect's test server.
type dialectEnv struct {
	name    Dialect
	envVar  string
	connect func(t testing.TB, raw string) (client any, backend func(Options) (*Backend, error), admin adminDB)
}

// adminDB runs test-only statements on its own connection pool.
type adminDB interface {
	exec(ctx context.Context, q string, args ...any) error
	scalar(ctx context.Context, q string, dest any, args ...any) error
	// execInTx runs q in a transaction left open (its row locks held)
	// until commit is called.
	execInTx(ctx context.Context, q string, args ...any) (commit func() error, err error)
}

type pgAdmin struct{ pool *pgxpool.Pool }

func (a pgAdmin) exec(ctx context.Context, q string, args ...any) error {
	_, err := a.pool.Exec(ctx, q, args...)
	return err
}

func (a pgAdmin) scalar(ctx context.Context, q string, dest any, args ...any) error {
	return a.pool.QueryRow(ctx, q, args...).Scan(dest)
}

func (a pgAdmin) execInTx(ctx context.Context, q string, args ...any) (func() error, error) {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		tx.Rollback(ctx)
		return nil, err
	}
	return func() error { return tx.Commit(ctx) }, nil
}

type myAdmin struct{ db *sql.DB }

func (a myAdmin) execInTx(ctx context.Context, q string, args ...any) (func() error, error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx.Commit, nil
}

func (a myAdmin) exec(ctx context.Context, q string, args ...any) error {
	_, err := a.db.ExecContext(ctx, q, args...)
	return err
}

func (a myAdmin) scalar(ctx context.Context, q string, dest any, args ...any) error {
	return a.db.QueryRowContext(ctx, q, args...).Scan(dest)
}

var dialects = []dialectEnv{
	{name: Postgres, envVar: "SIMBA_TEST_POSTGRES_URL", connect: connectPG},
	{name: MySQL, envVar: "SIMBA_TEST_MYSQL_URL", connect: connectMySQL},
}

func connectPG(t testing.TB, raw string) (any, func(Options) (*Backend, error), adminDB) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), raw)
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, func(o Options) (*Backend, error) { return NewPostgres(pool, o) }, pgAdmin{pool}
}

func connectMySQL(t testing.TB, raw string) (any, func(Options) (*Backend, error), adminDB) {
	t.Helper()
	db, err := sql.Open("mysql", raw)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, func(o Options) (*Backend, error) { return NewMySQL(db, o) }, myAdmin{db}
}

// forEachDialect runs fn as a subtest per dialect against its test server.
func forEachDialect(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, d := range dialects {
		t.Run(string(d.name), func(t *testing.T) {
			fn(t, newFixture(t, d))
		})
	}
}

// fixture is one dialect's server with a table prefix of its own, whose
// tables are dropped when the test ends.
type fixture struct {
	t       testing.TB
	dialect Dialect
	raw     string // the env variable's value
	prefix  string
	admin   adminDB
	client  any
	mk      func(Options) (*Backend, error)
}

func newFixture(t testing.TB, d dialectEnv) *fixture {
	t.Helper()
	raw := serverEnv(t, d.envVar)
	client, mk, admin := d.connect(t, raw)
	f := &fixture{t: t, dialect: d.name, raw: raw, prefix: uniquePrefix(), admin: admin, client: client, mk: mk}
	t.Cleanup(func() { f.dropTables(f.prefix) })
	return f
}

func uniquePrefix() string {
	var b [5]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:]) + "_"
}

func (f *fixture) dropTables(prefix string) {
	t := newTables(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range t.all() {
		if err := f.admin.exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			f.t.Logf("drop %s: %v", name, err)
		}
	}
}

// backend returns a migrated backend on the fixture's prefix, closed when
// the test ends.
func (f *fixture) backend() *Backend {
	f.t.Helper()
	return f.backendWith(Options{TablePrefix: f.prefix, Migrate: true})
}

func (f *fixture) backendWith(o Options) *Backend {
	f.t.Helper()
	b, err := f.mk(o)
	if err != nil {
		f.t.Fatalf("new backend: %v", err)
	}
	f.t.Cleanup(func() { b.Close() })
	return b
}

// mysqlURL turns the MySQL test DSN into the mysql:// URL Open takes.
func mysqlURL(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", dsn, err)
	}
	user := cfg.User
	if cfg.Passwd != "" {
		user += ":" + cfg.Passwd
	}
	return fmt.Sprintf("mysql://%s@%s/%s", user, cfg.Addr, cfg.DBName)
}

// openURL returns the URL Open takes for the fixture's server.
func (f *fixture) openURL() string {
	if f.dialect == MySQL {
		return mysqlURL(f.t, f.raw)
	}
	return f.raw
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open opens a session with lease d or fails the test.
func open(t testing.TB, b *Backend, d time.Duration) simba.SessionID {
	t.Helper()
	g, err := b.OpenSession(ctxT(t), d)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	return g.ID
}

func acquire(t testing.TB, b *Backend, s simba.SessionID, name string) simba.AcquireResult {
	t.Helper()
	r, err := b.Acquire(ctxT(t), s, name)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", name, err)
	}
	return r
}

func keepAlive(t testing.TB, b *Backend, s simba.SessionID, d time.Duration) simba.KeepAliveReply {
	t.Helper()
	r, err := b.KeepAlive(ctxT(t), s, d)
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	return r
}
