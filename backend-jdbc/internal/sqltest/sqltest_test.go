// Package sqltest holds the tests of the SQL backends against a real
// server: postgres_test.go and mysql_test.go each run the suite with a
// Harness that says how to reach their database, through the public API of
// simbapg and simbamysql, as users get the backends.
package sqltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// Harness describes one database's test server and the package under test.
type Harness struct {
	// Pkg is the package's name and exported sentinel errors.
	Pkg    *sqlcore.Pkg
	EnvVar string // the variable naming the test server

	// Schema is the package's Schema: the script of its tables.
	Schema func(prefix string) (string, error)

	// OldSchema is the tables as the versions before migration 2 made
	// them, written out (templates, see sqlcore.Tables.Expand), so that
	// the upgrade is tested from what those versions really created.
	OldSchema []string

	// Connect opens the test's own client on the server named by raw, the
	// variable's value, closed when the test ends: New builds backends
	// over it with the package's New, Admin runs the test's statements.
	Connect func(t testing.TB, raw string) (newBackend func(sqlcore.Options) (Backend, error), admin Admin)

	// Open is the package's Open.
	Open func(ctx context.Context, url string, o OpenOptions) (Backend, error)

	// URL returns a URL that Open takes for the server named by raw, its
	// host:port replaced by addr unless addr is empty; Addr returns that
	// host:port.
	URL  func(t testing.TB, raw, addr string) string
	Addr func(t testing.TB, raw string) string

	// Later is the database's clock plus seconds, in SQL, for the rows a
	// test locks or reads.
	Later func(seconds int) string

	// LockWaits counts the statements waiting for a row lock whose text is
	// LIKE its one parameter.
	LockWaits string

	// SingleConn returns a backend on a client with one connection, and
	// the server's id of that connection; Kill ends a connection from the
	// server's side.
	SingleConn func(t testing.TB, raw string, o sqlcore.Options) (Backend, func(context.Context) (int64, error))
	Kill       func(ctx context.Context, admin Admin, id int64) error

	// Uncancelled returns a backend on a client of its own whose
	// statements given up at their ctx are not cancelled on the server:
	// the client only stops waiting and drops the connection, as
	// go-sql-driver always does and as pgx does when its cancel request is
	// lost. The server then goes on running them; only a bound of their
	// own ends their lock waits.
	Uncancelled func(t testing.TB, raw string, o sqlcore.Options) Backend

	// RowsRead returns a backend on a client with one connection, and a
	// count of the rows the server has read for that connection so far
	// from the tables of prefix o.TablePrefix (PostgreSQL: index entries
	// and sequentially scanned rows of those tables; MySQL: the handler
	// reads of the connection, whatever the table).
	RowsRead func(t testing.TB, raw string, o sqlcore.Options) (Backend, func(context.Context) (int64, error))

	// Fences are the client kinds a Fence is tested with, Quote the
	// quote of identifiers: the fence tests' tables have columns named
	// key, token and value, words that the servers reserve.
	Fences []FenceClient
	Quote  string

	// Secrets describes URLs of the server for the tests of errors that
	// must not show a password.
	Secrets func(t testing.TB, raw string) Secrets

	// Server, when set, turns the variable's value into the one the tests
	// use (a DSN with session settings of its own, say); Only, when set,
	// picks the tests Run runs by name, the others being left out.
	Server func(t testing.TB, raw string) string
	Only   func(name string) bool

	// SplitAcquire says that an acquire reads a name and inserts its
	// first row in statements of their own.
	SplitAcquire bool
}

// OpenOptions are the settings Open takes.
type OpenOptions struct {
	sqlcore.Options
	Password string
}

// Backend is what the package's New and Open return, by the methods the
// tests use.
type Backend interface {
	simba.Backend
	simba.HolderReader
	simba.HolderLister
	simba.Sweeper
	OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error)
	Migrate(ctx context.Context) error
	Close() error
}

// Admin runs the tests' statements, written with ? placeholders, on a
// client of its own.
type Admin interface {
	Exec(ctx context.Context, q string, args ...any) error
	// Scan runs q and scans its one row into dest.
	Scan(ctx context.Context, q string, args []any, dest ...any) error
	// ExecInTx runs q in a transaction left open (its row locks held)
	// until commit is called.
	ExecInTx(ctx context.Context, q string, args ...any) (commit func() error, err error)
	// ExecScript runs the statements of a script in order on one
	// connection, as a database's command-line client would.
	ExecScript(ctx context.Context, stmts []string) error
}

// Dollars turns the ? placeholders of q into $1, $2...
func Dollars(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tests are the server tests Run runs, by name.
var tests = []struct {
	name string
	fn   func(t *testing.T, f *fixture)
}{
	{"Conformance", testConformance},
	{"MissingTables", testMissingTables},
	{"MigrationUpgradesOldTables", testMigrationUpgrade},
	{"ListBoundsRowsRead", testListBoundsRowsRead},
	{"ConcurrentMigrations", testConcurrentMigrations},
	{"ClosedBackend", testClosedBackend},
	{"CleanupDeletesExpiredSessions", testCleanupDeletesExpiredSessions},
	{"CleanupGoroutineRuns", testCleanupGoroutineRuns},
	{"TakeOverWaitsForRenewalInFlight", testTakeOverWaitsForRenewalInFlight},
	{"KeepAliveCostFlat", testKeepAliveCostFlat},
	{"KeepAliveSeesOtherChanges", testKeepAliveSeesOtherChanges},
	{"SweepBoundsLeaseRows", testSweepBoundsLeaseRows},
	{"SweepRacesAcquire", testSweepRacesAcquire},
	{"SweepAfterSnapshot", testSweepAfterSnapshot},
	{"SweepWaitsForRenewalInFlight", testSweepWaitsForRenewalInFlight},
	{"SweepRaceTakeOverAhead", testSweepRaceTakeOverAhead},
	{"SweepRaceKeepAliveBehindLive", testSweepRaceKeepAliveBehindLive},
	{"SweepRaceCleanupAhead", testSweepRaceCleanupAhead},
	{"TakeOverRaceReleaseAhead", testTakeOverRaceReleaseAhead},
	{"TakeOverStampsTermAfterWait", testTakeOverStampsTermAfterWait},
	{"CloseRaceKeepAliveAhead", testCloseRaceKeepAliveAhead},
	{"TakeOverRaceKeepAliveBehind", testTakeOverRaceKeepAliveBehind},
	{"SweepRaceTakeOverBehind", testSweepRaceTakeOverBehind},
	{"SweepRaceReleaseAhead", testSweepRaceReleaseAhead},
	{"SweepRaceReleaseBehind", testSweepRaceReleaseBehind},
	{"SweepRaceKeepAliveBehind", testSweepRaceKeepAliveBehind},
	{"SweepRaceSweepBehind", testSweepRaceSweepBehind},
	{"SweepRaceInsertAhead", testSweepRaceInsertAhead},
	{"SweepEndsAtItsBound", testSweepEndsAtItsBound},
	{"GroupAndCloseEndAtTheirBound", testGroupAndCloseEndAtTheirBound},
	{"FirstInsertAfterSweep", testFirstInsertAfterSweep},
	{"KilledConnection", testKilledConnection},
	{"KeepAliveAfterLockWaitDoesNotReviveExpiredSession", testKeepAliveAfterLockWait},
	{"AcquireAfterLockWaitRefusesExpiredSession", testAcquireAfterLockWait},
	{"ContendedRowKeepsSession", testContendedRowKeepsSession},
	{"FenceRowMissing", testFenceRowMissing},
	{"FenceInTransaction", testFenceInTransaction},
	{"PermitCheckAfterLockWait", testPermitCheckAfterLockWait},
	{"PermitCheckWaitsForRenewalInFlight", testPermitCheckWaitsForRenewalInFlight},
}

// IsolationTests reports whether the test named name depends on the
// isolation level of the server's transactions: the conformance suite, the
// tests of locks, lock waits, races and sweeps (but the million-name one,
// which measures). A harness runs them again at each level that a user may
// make the default.
func IsolationTests(name string) bool {
	return slices.Contains([]string{
		"Conformance", "TakeOverWaitsForRenewalInFlight", "KeepAliveSeesOtherChanges",
		"KeepAliveAfterLockWaitDoesNotReviveExpiredSession", "AcquireAfterLockWaitRefusesExpiredSession",
		"ContendedRowKeepsSession", "FirstInsertAfterSweep",
		"TakeOverRaceKeepAliveBehind", "TakeOverRaceReleaseAhead", "CloseRaceKeepAliveAhead",
		"TakeOverStampsTermAfterWait", "GroupAndCloseEndAtTheirBound",
		"PermitCheckAfterLockWait", "PermitCheckWaitsForRenewalInFlight",
	}, name) || strings.HasPrefix(name, "Sweep") && name != "SweepBoundsLeaseRows"
}

// Run runs the server tests of h, each as a subtest with tables of its own
// that are dropped when it ends.
func Run(t *testing.T, h Harness) {
	raw := backendtest.ServerEnv(t, h.EnvVar)
	if h.Server != nil {
		raw = h.Server(t, raw)
	}
	for _, tt := range tests {
		if h.Only != nil && !h.Only(tt.name) {
			continue
		}
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newFixture(t, &h, raw)) })
	}
}

// fixture is the test server with a table prefix of the test's own.
type fixture struct {
	t      testing.TB
	h      *Harness
	raw    string // the variable's value
	prefix string
	admin  Admin
	mk     func(sqlcore.Options) (Backend, error)
}

func newFixture(t testing.TB, h *Harness, raw string) *fixture {
	t.Helper()
	mk, admin := h.Connect(t, raw)
	f := &fixture{t: t, h: h, raw: raw, prefix: uniquePrefix(), admin: admin, mk: mk}
	t.Cleanup(func() { f.dropTables(f.prefix) })
	return f
}

func uniquePrefix() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:]) + "_"
}

func (f *fixture) dropTables(prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range sqlcore.NewTables(prefix).All() {
		if err := f.admin.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			f.t.Logf("drop %s: %v", name, err)
		}
	}
}

// options are the options of a migrated backend on the fixture's prefix.
func (f *fixture) options() sqlcore.Options {
	return sqlcore.Options{TablePrefix: f.prefix, Migrate: true}
}

// backend returns a migrated backend on the fixture's client and prefix,
// closed when the test ends.
func (f *fixture) backend() Backend {
	f.t.Helper()
	return f.backendWith(f.options())
}

func (f *fixture) backendWith(o sqlcore.Options) Backend {
	f.t.Helper()
	b, err := f.mk(o)
	if err != nil {
		f.t.Fatalf("new backend: %v", err)
	}
	f.t.Cleanup(func() { _ = b.Close() })
	return b
}

// open returns a backend that Open made on the fixture's prefix, closed
// when t ends.
func (f *fixture) open(t testing.TB) Backend {
	t.Helper()
	b, err := f.h.Open(ctxT(t), f.h.URL(t, f.raw, ""), OpenOptions{Options: f.options()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// expire ends session s now, as if its last keep-alive had lapsed.
func (f *fixture) expire(s simba.SessionID) { f.expireIn(f.t, s) }

// expireIn is expire for a subtest t.
func (f *fixture) expireIn(t testing.TB, s simba.SessionID) {
	t.Helper()
	q := "UPDATE " + f.prefix + "session SET expires_at = " + f.h.Later(-1) + " WHERE id = ?"
	if err := f.admin.Exec(ctxT(t), q, string(s)); err != nil {
		t.Fatalf("expire session: %v", err)
	}
}

// renewSQL renews a session by hand, as a keep-alive would.
func (f *fixture) renewSQL() string {
	return "UPDATE " + f.prefix + "session SET expires_at = " + f.h.Later(60) + " WHERE id = ?"
}

// scalar runs q on the test's own client and scans its one value into
// dest.
func (f *fixture) scalar(ctx context.Context, q string, dest any, args ...any) error {
	return f.admin.Scan(ctx, q, args, dest)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// unsure is the request of a keep-alive for d that holds nothing and
// sends names as Unsure, so that the reply's Owned says which of them the
// session owns.
func unsure(d time.Duration, names ...string) simba.KeepAliveRequest {
	return simba.KeepAliveRequest{Lease: d, Unsure: names}
}

// open opens a session with lease d or fails the test.
func open(t testing.TB, b simba.Backend, d time.Duration) simba.SessionID {
	t.Helper()
	g, err := b.OpenSession(ctxT(t), d)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	return g.ID
}

func acquire(t testing.TB, b simba.Backend, s simba.SessionID, name string) simba.AcquireResult {
	t.Helper()
	r, err := b.Acquire(ctxT(t), s, name)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", name, err)
	}
	return r
}

// keepAlive renews s for d and asks which of names s owns: its reply's
// Owned says, with their tokens (see unsure).
func keepAlive(t testing.TB, b simba.Backend, s simba.SessionID, d time.Duration, names ...string) simba.KeepAliveReply {
	t.Helper()
	r, err := b.KeepAlive(ctxT(t), s, unsure(d, names...))
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	return r
}
