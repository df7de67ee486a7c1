// Code generated from internal/sqlcore/templates/backend.go.tmpl by go generate; DO NOT EDIT.

package simbapg

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

// DefaultTablePrefix is the table prefix used when Options.TablePrefix is
// empty: the tables are simba_session, simba_lease and simba_group_member.
const DefaultTablePrefix = sqlcore.DefaultTablePrefix

// DefaultCleanupInterval is how often expired session rows are deleted when
// Options.CleanupInterval is zero: one minute.
const DefaultCleanupInterval = sqlcore.DefaultCleanupInterval

// MaxLease is the longest session lease a backend accepts: 24 hours.
const MaxLease = sqlcore.MaxLease

// CloseTimeout bounds Backend.Close: 5 seconds.
const CloseTimeout = sqlcore.CloseTimeout

var pkg = sqlcore.NewPkg("simbapg")

var (
	// ErrClosed is returned by every method of a Backend after Close, and
	// by the calls that Close ended.
	ErrClosed = pkg.ErrClosed

	// ErrSchemaMissing is matched (with errors.Is) by every
	// *MissingTableError and *OutdatedSchemaError of this package: the
	// tables are not ready for this version, and the migration would make
	// them so.
	ErrSchemaMissing = pkg.ErrSchemaMissing

	// ErrInvalidOptions is matched (with errors.Is) by every *OptionsError
	// of this package.
	ErrInvalidOptions = pkg.ErrInvalidOptions

	// ErrInvalidFence is matched (with errors.Is) by the errors of NewFence
	// and of a Fence used with the wrong arguments: a token above
	// math.MaxInt64, a value count that differs from FenceTable.Columns, or
	// a nil handle.
	ErrInvalidFence = pkg.ErrInvalidFence

	// ErrFenceRowMissing is matched by the error of a fenced write to a key
	// that has no row: create it first with Fence.Init (or an INSERT of
	// your own with token 0).
	ErrFenceRowMissing = pkg.ErrFenceRowMissing
)

// OptionsError reports an Options field, URL or client that cannot be
// used: Field names it ("TablePrefix", "url", "pool") and Reason says what
// is wrong, quoting nothing of a URL that could hold a password. It matches
// ErrInvalidOptions.
type OptionsError = sqlcore.OptionsError

// MissingTableError reports that tables the backend needs do not exist,
// which happens when Options.Migrate is off and the schema was never
// applied (or was applied with another table prefix). Tables names them,
// prefix included; Err is the driver's error when one revealed the
// problem. It matches ErrSchemaMissing.
type MissingTableError = sqlcore.MissingTableError

// OutdatedSchemaError reports tables made by an earlier version of this
// package that lack the columns or tables of a later migration step, which
// happens when Options.Migrate is off and the step was never applied.
// Migration is the first step they lack (2: "session identity", the
// identity column of the session table; 4: "lease floor", the floor
// table), Columns the missing columns as table.column and Tables the
// missing tables; Err is the driver's error when one revealed the problem.
// It matches ErrSchemaMissing. Backend.Migrate, Options.Migrate or the
// script of Schema, applied by hand, add them without touching the rows.
type OutdatedSchemaError = sqlcore.OutdatedSchemaError

// Options configure a Backend. The zero value is usable: prefix "simba_",
// no migration, cleanup every minute, no logging.
type Options struct {
	// TablePrefix is prepended to the table names: <prefix>session,
	// <prefix>lease and <prefix>group_member. It must match
	// ^[A-Za-z_][A-Za-z0-9_]{0,40}$ and is the only text spliced into SQL.
	// Default "simba_". PostgreSQL folds it to lower case, as it does any
	// unquoted identifier.
	TablePrefix string

	// Migrate creates the tables, or brings tables of an earlier version
	// up to date, on first use when a table or a column is missing: it
	// runs every migration step (CREATE ... IF NOT EXISTS, ALTER TABLE ...
	// ADD COLUMN IF NOT EXISTS) in one transaction under an advisory lock.
	// Default false: the tables must exist and be up to date, and a call
	// fails with a *MissingTableError naming the missing tables, or an
	// *OutdatedSchemaError naming the missing migration step, until they
	// are. The script is the one Schema returns.
	Migrate bool

	// CleanupInterval is how often a background goroutine deletes expired
	// session rows and their group memberships, in batches of 500. Leases
	// of deleted sessions are free anyway (lease rows are deleted only by
	// Sweep), so cleanup only bounds table growth. Default one minute; a
	// negative value disables it. The goroutine stops on Close.
	CleanupInterval time.Duration

	// TLS, when set, is the TLS configuration of the connections Open
	// makes; it overrides the URL's sslmode. When its ServerName is empty,
	// the name verified is the host each connection dials. New ignores it:
	// its pool is configured by its owner.
	TLS *tls.Config

	// Password, when set, is the password Open authenticates with; it
	// overrides the URL's, so a secret need not be written in the URL. New
	// ignores it. It is never logged.
	Password string

	// Logger receives migration notices (Info) and cleanup failures (Warn).
	// Default: nothing is logged. Connection strings and passwords are
	// never logged.
	Logger *slog.Logger
}

func (o Options) core() sqlcore.Options {
	return sqlcore.Options{TablePrefix: o.TablePrefix, Migrate: o.Migrate, CleanupInterval: o.CleanupInterval, Logger: o.Logger}
}

func (o Options) printed() sqlcore.Printed {
	return sqlcore.Printed{Type: "simbapg.Options", TablePrefix: o.TablePrefix, Migrate: o.Migrate,
		CleanupInterval: o.CleanupInterval, TLS: o.TLS != nil, Password: o.Password, Logger: o.Logger != nil}
}

// String describes o with Password shown as "redacted" when set.
func (o Options) String() string { return o.printed().String() }

// GoString is String, so that %#v does not print the password either.
func (o Options) GoString() string { return o.printed().String() }

// LogValue makes slog print o with Password redacted.
func (o Options) LogValue() slog.Value { return o.printed().LogValue() }

// Backend is a simba.Backend on a PostgreSQL 14+ database. It is safe for
// concurrent use.
//
// Every method takes ctx first: cancelling it abandons the call, whose
// statement is interrupted, and the call returns an error wrapping ctx's.
// A statement the server had already committed stays committed: a lease
// won that way shows in the session's next keep-alive, and a session opened
// that way expires unused.
type Backend struct {
	e    *sqlcore.Backend
	pool *pgxpool.Pool
}

var (
	_ simba.Backend         = (*Backend)(nil)
	_ simba.HolderReader    = (*Backend)(nil)
	_ simba.IdentityOpener  = (*Backend)(nil)
	_ simba.Sweeper         = (*Backend)(nil)
	_ simba.HolderLister    = (*Backend)(nil)
	_ simba.LeaseLimiter    = (*Backend)(nil)
	_ simba.PermitAcquirer  = (*Backend)(nil)
	_ simba.ReleaseNotifier = (*Backend)(nil)
)

// New returns a backend on the database reached through pool. The caller
// keeps ownership of pool: Close does not close it, and it must stay open
// until the backend is closed. The statements are written for READ
// COMMITTED, PostgreSQL's default, and each runs on its own, outside any
// transaction; one that a default_transaction_isolation of REPEATABLE READ
// or SERIALIZABLE aborts with a serialization failure runs again. The
// acquire, the release and the keep-alive are sent with a lock_timeout of
// three quarters of ctx's time left, in the same round trip, so the server
// stops waiting for a row lock before the caller gives up.
//
// Nothing is sent to the server here; the schema is checked (or migrated,
// with Options.Migrate) on the first call. It fails only on a nil pool or
// invalid options, with an *OptionsError.
func New(pool *pgxpool.Pool, opts Options) (*Backend, error) {
	if pool == nil {
		return nil, pkg.OptionsError("pool", "nil *pgxpool.Pool")
	}
	return newBackend(pool, opts, nil)
}

func newBackend(pool *pgxpool.Pool, opts Options, closeClient func()) (*Backend, error) {
	e, err := sqlcore.New(sqlcore.Config{
		Pkg:         pkg,
		Database:    "postgres",
		Migrations:  migrations,
		Options:     opts.core(),
		Dialect:     func(t sqlcore.Tables) sqlcore.Dialect { return newDialect(pool, t) },
		CloseClient: closeClient,
	})
	if err != nil {
		return nil, err
	}
	return &Backend{e: e, pool: pool}, nil
}

// Schema returns the SQL script that creates the tables with table prefix
// prefix (DefaultTablePrefix when empty), for a DBA to review and apply by
// hand. It is the script Options.Migrate runs, its numbered migration steps
// in order: 1 creates the tables, 2 adds the session table's identity
// column, 3 its lease_gen column (no longer used), 4 creates the lease
// floor table and its row, 5 the semaphore table, 6 the lease table's
// watched column. Every statement is CREATE ... IF NOT EXISTS or ALTER TABLE ...
// ADD COLUMN IF NOT EXISTS, so applying it twice is harmless, and applying
// it to tables of an earlier version adds what they lack and keeps their
// rows. It fails with an *OptionsError for a prefix that is not an
// identifier of at most 41 characters.
func Schema(prefix string) (string, error) {
	return pkg.Script("PostgreSQL", migrations, prefix)
}

// Close ends the calls in flight, which fail with ErrClosed, stops the
// cleanup goroutine and, when Open created the pool, closes it. It returns
// within CloseTimeout whatever the server does; if the pool is still
// closing then (a server that stopped answering), it goes on closing in the
// background and Close says so in its error. Sessions are not closed: they
// expire on the database. Every call after Close fails with ErrClosed.
// Close is idempotent.
func (b *Backend) Close() error { return b.e.Close() }

// Migrate creates the tables that are missing and adds the columns that
// tables of an earlier version lack, whatever Options.Migrate says, with
// the statements Schema returns, in one transaction under an advisory lock.
// It is idempotent and safe to run from several processes at once, and
// while nodes of the earlier version use the tables: they go on working,
// and their sessions have no identity. The ALTER TABLE of step 2 takes the
// session table's exclusive lock for an instant, also when the column
// exists. Cancelling ctx abandons it; the transaction then rolls back.
func (b *Backend) Migrate(ctx context.Context) error { return b.e.Migrate(ctx) }

// OpenSession inserts a new session row expiring lease from now (database
// time), with no identity. Cancelling ctx abandons the call: the session
// may or may not exist, and if it does it expires unused.
//
// A second round trip reads the server's durability settings; the grant's
// Warnings name those under which a token handed out can be handed out
// again (WarnCommitNotDurable, WarnAsyncReplication). When that read
// fails the session is granted without warnings, and the next one reads
// again.
func (b *Backend) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	return b.OpenSessionAs(ctx, lease, "")
}

// OpenSessionAs is OpenSession for a session whose row stores identity in
// its identity column, which Holder reports; the engine opens its sessions
// with it (simba.WithIdentity). An empty identity stores none. An identity
// longer than simba.MaxIdentity bytes, or not printable UTF-8, fails with
// an error matching simba.ErrInvalidArgument before any statement. Two
// round trips, as OpenSession.
func (b *Backend) OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error) {
	return b.e.OpenSessionAs(ctx, lease, identity)
}

// ListHolders returns a page of the leases held now whose names start
// with q.Prefix, in name order after q.Cursor, with their holders as
// Holder reports them (simba.HolderLister). One statement, a snapshot read
// without locks, which reads at most 4 × q.Limit lease rows of the
// primary key's index and their sessions' rows: a page of a table with
// many free rows may hold fewer leases than q.Limit and still have a next
// one. The cursor of the next page is a lease name.
func (b *Backend) ListHolders(ctx context.Context, q simba.ListQuery) (simba.HolderPage, error) {
	return b.e.ListHolders(ctx, q)
}

// Holder returns the session that owns name now, with the identity it was
// opened with, the token of its term and when the term began (the
// acquired_at of the lease row, set by the acquire from the database
// clock). ok is false when nobody does: no row, released, or an owner
// whose session expired (by the database clock), was closed or was cleaned
// up. It reads the lease and session rows in one statement, without locks,
// comparing the session's expiry with the statement's now(): a holder it
// reports was live at that instant, and may have lost the lease since. It
// returns a *simba.NameError for an invalid name. One round trip.
func (b *Backend) Holder(ctx context.Context, name string) (h simba.Holder, ok bool, err error) {
	return b.e.Holder(ctx, name)
}

// KeepAlive moves the session's expiry to req.Lease from now (database
// time) and reports the remaining validity, which leases of req the
// session lost or owns, and the live member count of each group it joined.
// A session that has expired or was closed is never renewed: the answer is simba.ErrSessionExpired, also
// when the keep-alive had to wait for a lock on the session row until after
// it expired (its expiry is compared with clock_timestamp() once the row is
// locked). One round trip.
func (b *Backend) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	return b.e.KeepAlive(ctx, s, req)
}

// Acquire makes s the owner of name when the lease is free (no row, no
// owner, or an owner whose session expired or no longer exists) or already
// owned by s, and starts a new term: the token is the row's previous token
// plus one (1 for a new row). Ownership is decided in one statement that
// locks the lease row and the previous owner's session row, so concurrent
// candidates get exactly one winner and a keep-alive racing the take-over
// is either seen or refused. The caller's own session row is read, not
// locked, so its keep-alive never waits behind the acquire; a caller whose
// session expired while the statement waited for a lock never wins. A
// lease row held by a transaction past three quarters of ctx's time left
// ends the wait on the server (lock_timeout), and the acquire reports a
// loss. It returns simba.ErrSessionExpired when s was not live when the
// statement began, and a *simba.NameError for an invalid name. One round
// trip.
func (b *Backend) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	return b.e.Acquire(ctx, s, name)
}

// AcquirePermit acquires slot p.Slot of the semaphore p.Semaphore, the
// lease simba.PermitName(p.Semaphore, p.Slot), with the ownership rules of
// Acquire, in one READ COMMITTED transaction that first locks the semaphore's row
// of <prefix>semaphore (inserted on first use), so that the permit
// acquires of one semaphore run one at a time. When the row's permits
// differ from p.Permits and a live session owns one of the slots they
// count, the call fails with an error matching simba.ErrPermitsMismatch,
// naming both numbers, and changes nothing; otherwise the row takes
// p.Permits. The slot's token is above the row's token, the highest of
// the semaphore, which it replaces: Sweep never deletes these rows, so a
// semaphore's tokens increase in the order its permits are granted. It
// returns simba.ErrSessionExpired when s is not live, and an error
// matching simba.ErrInvalidArgument or a *simba.NameError for a permit
// simba.ValidatePermit refuses. A serialization failure or a deadlock runs the transaction
// again; a lock wait past three quarters of ctx's time left ends it on the
// server (lock_timeout), and the acquire reports a loss.
func (b *Backend) AcquirePermit(ctx context.Context, s simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	return b.e.AcquirePermit(ctx, s, p)
}

// Release frees name if s owns it with exactly token; otherwise it does
// nothing and returns nil, so a late release never frees a later term. The
// row and its token stay. One round trip. When a waiter watches the lease
// (WatchRelease), the release is broadcast in the same statement, with
// pg_notify on the channel <prefix>release, and reaches the waiters when it
// commits.
func (b *Backend) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	return b.e.Release(ctx, s, name, token)
}

// WatchWait bounds a WatchRelease: its wait for the listening connection
// and its statement.
const WatchWait = sqlcore.WatchWait

// WatchRelease returns a channel that is closed once name may have been
// released (simba.ReleaseNotifier), so that a waiting candidate tries at
// once instead of at its next regular attempt (R-CAND-2). The backend
// LISTENs on the channel <prefix>release over one connection of its own,
// taken from the pool on the first watch and kept until Close (the pool
// opens another in its place when it needs one). A watch marks the lease
// row watched in one statement, which also reports whether the lease is
// held: a lease that is not is reported at once. The next release of a
// watched lease, and the close of its owner's session, broadcast the
// name; the next owner clears the mark, and a waiter that lost to it
// marks the row again. A lease whose owner's session expires is not
// broadcast: its waiters take it at their next regular attempt.
//
// When the listening connection fails (a server restart, a failover),
// every watch is closed, since a broadcast may have been missed, and the
// backend listens again on a new connection, from a pause of 100 ms
// doubling up to 5 s. A missed broadcast only delays a waiter to its
// regular attempt. The watch is dropped when ctx is done. A connection
// pooler in transaction mode does not keep a LISTEN: a probe sent once
// the connection listens never arrives, and watches then fail with an
// error matching simba.ErrNotSupported (waiters take the lease at their
// regular attempts) until a connection listens again, tried once a
// minute. It fails when no connection listens within WatchWait, and with
// a *simba.NameError for an invalid name.
func (b *Backend) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	return b.e.WatchRelease(ctx, name)
}

// MinSweepIdle is the shortest idle time Sweep accepts: one second.
const MinSweepIdle = sqlcore.MinSweepIdle

// Sweep deletes the lease rows of names that no live session owns (no
// owner, or an owner whose session expired, was closed or cleaned up) and
// whose last term began at least idle ago by the database clock, so that
// the lease table stays bounded by the names in use rather than every
// name ever used (docs/adr/0012-bounded-lease-state.md). It returns how
// many rows it deleted. It walks the lease table in name order, 500 rows
// per transaction; each transaction raises the floor table's token to the
// highest token it deleted, and a name without a row starts its next term
// one above the floor (or above the token the acquire last saw for it),
// so the tokens of a name keep increasing, though no longer one by one.
// Run it from one node at a time, as often as the names in use call for;
// two sweeps at once are safe. An idle below MinSweepIdle fails with an
// error matching simba.ErrInvalidArgument. Cancelling ctx abandons it; the
// batches committed stay committed. It is the backend's simba.Sweeper,
// which Client.Sweep calls.
func (b *Backend) Sweep(ctx context.Context, idle time.Duration) (int, error) {
	return b.e.Sweep(ctx, idle)
}

// JoinGroup records s as a member of group and returns the number of live
// members after the join. It returns simba.ErrSessionExpired when s is not
// live. One round trip.
func (b *Backend) JoinGroup(ctx context.Context, s simba.SessionID, group string) (int, error) {
	return b.e.JoinGroup(ctx, s, group)
}

// LeaveGroup deletes the membership of s in group, if any. One round trip.
func (b *Backend) LeaveGroup(ctx context.Context, s simba.SessionID, group string) error {
	return b.e.LeaveGroup(ctx, s, group)
}

// CloseSession deletes the session row and its memberships in one
// statement, which frees every lease it owned at once (their rows keep the
// old owner id and token, and count as free) and broadcasts those a waiter
// watches, as Release does. Closing an unknown session is a no-op. One
// round trip.
func (b *Backend) CloseSession(ctx context.Context, s simba.SessionID) error {
	return b.e.CloseSession(ctx, s)
}

// MaxLeaseDuration returns MaxLease, the longest session lease the backend
// accepts: simba.New refuses a client whose LeaseDuration exceeds it with a
// *simba.ConfigError, since every OpenSession of that lease would fail.
func (b *Backend) MaxLeaseDuration() time.Duration { return MaxLease }
