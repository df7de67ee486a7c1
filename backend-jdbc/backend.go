package simbasql

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	simba "github.com/simba-go/simba/core"
)

// DefaultCleanupInterval is how often expired session rows are deleted when
// Options.CleanupInterval is zero.
const DefaultCleanupInterval = time.Minute

// MaxLease is the longest session lease a backend accepts.
const MaxLease = 24 * time.Hour

const (
	cleanupBatch      = 500 // sessions deleted per statement
	cleanupMaxBatches = 20  // statements per cleanup round, so a round stays short
)

// Options configure a Backend. The zero value is usable: prefix "simba_",
// no migration, cleanup every minute, no logging.
type Options struct {
	// TablePrefix is prepended to the table names: <prefix>session,
	// <prefix>lease and <prefix>group_member. It must match
	// ^[A-Za-z_][A-Za-z0-9_]{0,40}$ and is the only text spliced into SQL.
	// Default "simba_". PostgreSQL folds it to lower case, as it does any
	// unquoted identifier.
	TablePrefix string

	// Migrate creates the tables (CREATE ... IF NOT EXISTS) on first use
	// when any of them is missing. Default false: the tables must exist, and a
	// call fails with a *MissingTableError naming them until they do. The
	// script is the one Schema returns.
	Migrate bool

	// CleanupInterval is how often a background goroutine deletes expired
	// session rows and their group memberships, in batches of 500. Leases
	// of deleted sessions are free anyway (lease rows themselves are never
	// deleted), so cleanup only bounds table growth. Default one minute; a
	// negative value disables it. The goroutine stops on Close.
	CleanupInterval time.Duration

	// TLS, when set, is the TLS configuration of the connections Open
	// makes; it overrides the URL's sslmode (PostgreSQL) or tls (MySQL)
	// parameter. NewPostgres and NewMySQL ignore it: their client is
	// configured by its owner.
	TLS *tls.Config

	// Password, when set, is the password Open authenticates with; it
	// overrides the URL's, so a secret need not be written in the URL.
	// NewPostgres and NewMySQL ignore it. It is never logged.
	Password string

	// Logger receives migration notices (Info) and cleanup failures (Warn).
	// Default: nothing is logged. Connection strings and passwords are
	// never logged.
	Logger *slog.Logger
}

// resolve validates o and fills in its defaults.
func (o Options) resolve() (Options, error) {
	if o.TablePrefix == "" {
		o.TablePrefix = DefaultTablePrefix
	}
	if err := validatePrefix(o.TablePrefix); err != nil {
		return o, err
	}
	if o.CleanupInterval == 0 {
		o.CleanupInterval = DefaultCleanupInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// store is one dialect's statements. Session ids reaching it are well
// formed, names are valid and the schema has been checked.
type store interface {
	// missing returns the tables that do not exist.
	missing(ctx context.Context) ([]string, error)
	migrate(ctx context.Context, stmts []string) error
	// prepare readies the statements once the tables exist.
	prepare(ctx context.Context) error
	openSession(ctx context.Context, id string, lease time.Duration) error
	// keepAlive returns live == false when the session is expired or gone.
	keepAlive(ctx context.Context, id string, lease time.Duration) (reply simba.KeepAliveReply, live bool, err error)
	acquire(ctx context.Context, id, name string) (token uint64, won, live bool, err error)
	release(ctx context.Context, id, name string, token uint64) error
	joinGroup(ctx context.Context, id, group string) (members int, live bool, err error)
	leaveGroup(ctx context.Context, id, group string) error
	closeSession(ctx context.Context, id string) error
	// cleanup deletes up to limit expired sessions and their memberships.
	cleanup(ctx context.Context, limit int) (int, error)
	// close releases prepared statements; it never closes the client.
	close()
}

// Backend is a simba.Backend on a SQL database. It is safe for concurrent
// use. Close stops its cleanup goroutine (and closes the client when Open
// created it).
type Backend struct {
	dialect Dialect
	tables  tables
	opts    Options
	st      store
	log     *slog.Logger

	closeClient func() // nil when the caller owns the client

	initSem  chan struct{} // one schema check at a time, ctx-aware
	schemaOK atomic.Bool

	closed    atomic.Bool
	closeOnce sync.Once
	stopBG    context.CancelFunc
	bgDone    chan struct{}
}

var _ simba.Backend = (*Backend)(nil)

// NewPostgres returns a backend on a PostgreSQL 14+ database reached
// through pool. The caller keeps ownership of pool: Close does not close
// it, and it must stay open until the backend is closed. The pool's default
// READ COMMITTED isolation is what the statements are written for; every
// statement runs on its own, outside any transaction.
//
// Nothing is sent to the server here; the schema is checked (or migrated,
// with Options.Migrate) on the first call. It fails only on a nil pool or
// invalid options.
func NewPostgres(pool *pgxpool.Pool, opts Options) (*Backend, error) {
	if pool == nil {
		return nil, &OptionsError{Field: "pool", Reason: "nil *pgxpool.Pool"}
	}
	return newBackend(Postgres, opts, func(t tables) store { return newPGStore(pool, t) }, nil)
}

// NewMySQL returns a backend on a MySQL 8 or MariaDB 10.11+ database reached
// through db, a *sql.DB of github.com/go-sql-driver/mysql. The caller keeps
// ownership of db: Close does not close it. Statements run in autocommit
// mode (the keep-alive in a short transaction) with locking reads where
// ownership is decided, so they are correct under InnoDB's default
// REPEATABLE READ. The DSN must not set
// interpolateParams with an unsafe collation; parseTime is not needed.
//
// Nothing is sent to the server here; the schema is checked (or migrated,
// with Options.Migrate) on the first call. It fails only on a nil db or
// invalid options.
func NewMySQL(db *sql.DB, opts Options) (*Backend, error) {
	if db == nil {
		return nil, &OptionsError{Field: "db", Reason: "nil *sql.DB"}
	}
	return newBackend(MySQL, opts, func(t tables) store { return newMySQLStore(db, t) }, nil)
}

func newBackend(d Dialect, opts Options, mk func(tables) store, closeClient func()) (*Backend, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	t := newTables(opts.TablePrefix)
	b := &Backend{
		dialect:     d,
		tables:      t,
		opts:        opts,
		st:          mk(t),
		log:         opts.Logger,
		closeClient: closeClient,
		initSem:     make(chan struct{}, 1),
	}
	if opts.CleanupInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		b.stopBG = cancel
		b.bgDone = make(chan struct{})
		go b.cleanupLoop(ctx, opts.CleanupInterval)
	}
	return b, nil
}

// Dialect reports the database flavour of b.
func (b *Backend) Dialect() Dialect { return b.dialect }

// Close stops the cleanup goroutine and waits for it, and closes the
// database client when Open created it. Sessions are not closed: they
// expire on the database. Every call after Close fails with ErrClosed.
// Close is idempotent and always returns nil.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		if b.stopBG != nil {
			b.stopBG()
			<-b.bgDone
		}
		b.st.close()
		if b.closeClient != nil {
			b.closeClient()
		}
	})
	return nil
}

// Migrate creates the tables that are missing, whatever Options.Migrate
// says, with the statements Schema returns. It is idempotent and safe to
// run from several processes at once.
func (b *Backend) Migrate(ctx context.Context) error {
	if b.closed.Load() {
		return ErrClosed
	}
	stmts, err := ddl(b.dialect, b.opts.TablePrefix)
	if err != nil {
		return err
	}
	if err := b.st.migrate(ctx, stmts); err != nil {
		return fmt.Errorf("simbasql: migrate: %w", err)
	}
	b.log.Info("simbasql: schema ready", "dialect", string(b.dialect), "prefix", b.opts.TablePrefix)
	return nil
}

// ready makes sure the schema was checked (or migrated) and the statements
// prepared. It returns at once after the first success; a failure is
// retried by the next call.
func (b *Backend) ready(ctx context.Context) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if b.schemaOK.Load() {
		return nil
	}
	select {
	case b.initSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("simbasql: schema check: %w", ctx.Err())
	}
	defer func() { <-b.initSem }()
	if b.schemaOK.Load() {
		return nil
	}
	missing, err := b.st.missing(ctx)
	switch {
	case err != nil:
		return b.wrap("schema check", err)
	case len(missing) > 0 && b.opts.Migrate:
		if err := b.Migrate(ctx); err != nil {
			return err
		}
	case len(missing) > 0:
		return &MissingTableError{Tables: missing}
	}
	if err := b.st.prepare(ctx); err != nil {
		return b.wrap("prepare", err)
	}
	b.schemaOK.Store(true)
	return nil
}

// newSessionID returns 128 random bits in hex (R-SES-2).
func newSessionID() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("simbasql: session id: %w", err)
	}
	return hex.EncodeToString(raw[:]), nil
}

// wellFormed reports whether s could have been made by newSessionID. Any
// other id cannot exist in the table, so it is treated as unknown without
// asking the database.
func wellFormed(s simba.SessionID) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func checkLease(lease time.Duration) error {
	if lease <= 0 || lease > MaxLease {
		return fmt.Errorf("simbasql: lease %v out of range (0, %v]", lease, MaxLease)
	}
	return nil
}

// OpenSession inserts a new session row expiring lease from now (database
// time). One round trip.
func (b *Backend) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	if err := checkLease(lease); err != nil {
		return simba.SessionGrant{}, err
	}
	if err := b.ready(ctx); err != nil {
		return simba.SessionGrant{}, err
	}
	id, err := newSessionID()
	if err != nil {
		return simba.SessionGrant{}, err
	}
	if err := b.st.openSession(ctx, id, lease); err != nil {
		return simba.SessionGrant{}, b.wrap("open session", err)
	}
	// The row expires lease after the statement ran, which is after the
	// caller sent it: reporting lease can only err on the safe side.
	return simba.SessionGrant{ID: simba.SessionID(id), Remaining: lease}, nil
}

// KeepAlive moves the session's expiry to lease from now (database time)
// and reports the remaining validity, the leases the session owns and the
// live member count of each group it joined. A session that has expired
// (expires_at <= now) or was closed is never renewed: the answer is
// simba.ErrSessionExpired, also when the keep-alive had to wait for a lock
// on the session row until after it expired (its expiry is compared with
// the time the row was locked). One round trip on PostgreSQL, five on MySQL
// (a transaction that locks the row before renewing it, then a read).
func (b *Backend) KeepAlive(ctx context.Context, s simba.SessionID, lease time.Duration) (simba.KeepAliveReply, error) {
	if err := checkLease(lease); err != nil {
		return simba.KeepAliveReply{}, err
	}
	if !wellFormed(s) {
		return simba.KeepAliveReply{}, simba.ErrSessionExpired
	}
	if err := b.ready(ctx); err != nil {
		return simba.KeepAliveReply{}, err
	}
	reply, live, err := b.st.keepAlive(ctx, string(s), lease)
	if err != nil {
		return simba.KeepAliveReply{}, b.wrap("keep-alive", err)
	}
	if !live {
		return simba.KeepAliveReply{}, simba.ErrSessionExpired
	}
	return reply, nil
}

// Acquire makes s the owner of name when the lease is free (no row, no
// owner, or an owner whose session expired or no longer exists) or already
// owned by s, and starts a new term: the token is the row's previous token
// plus one (1 for a new row). Ownership is decided in one statement that
// locks the lease row and the previous owner's session row, so concurrent
// candidates get exactly one winner and a keep-alive racing the take-over
// is either seen or refused. A caller whose session expired while the
// statement waited for a lock never wins. It returns
// simba.ErrSessionExpired when s is not live, and a *simba.NameError for an
// invalid name. One round trip on PostgreSQL; on MySQL two when the lease
// is won from an existing row (the second confirms s is still live), two
// when it is held elsewhere, four for a name never acquired before.
func (b *Backend) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	if err := simba.ValidateName(name); err != nil {
		return simba.AcquireResult{}, err
	}
	if !wellFormed(s) {
		return simba.AcquireResult{}, simba.ErrSessionExpired
	}
	if err := b.ready(ctx); err != nil {
		return simba.AcquireResult{}, err
	}
	token, won, live, err := b.st.acquire(ctx, string(s), name)
	if err != nil {
		return simba.AcquireResult{}, b.wrap(fmt.Sprintf("acquire %q", name), err)
	}
	if !live {
		return simba.AcquireResult{}, simba.ErrSessionExpired
	}
	if !won {
		return simba.AcquireResult{}, nil
	}
	return simba.AcquireResult{Won: true, Token: token}, nil
}

// Release frees name if s owns it with exactly token; otherwise it does
// nothing and returns nil, so a late release never frees a later term. The
// row and its token stay. One round trip.
func (b *Backend) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	if err := simba.ValidateName(name); err != nil {
		return err
	}
	if !wellFormed(s) || token == 0 || token > 1<<63-1 {
		return nil
	}
	if err := b.ready(ctx); err != nil {
		return err
	}
	if err := b.st.release(ctx, string(s), name, token); err != nil {
		return b.wrap(fmt.Sprintf("release %q", name), err)
	}
	return nil
}

// JoinGroup records s as a member of group and returns the number of live
// members after the join. It returns simba.ErrSessionExpired when s is not
// live. One round trip on PostgreSQL, two on MySQL.
func (b *Backend) JoinGroup(ctx context.Context, s simba.SessionID, group string) (int, error) {
	if err := simba.ValidateName(group); err != nil {
		return 0, err
	}
	if !wellFormed(s) {
		return 0, simba.ErrSessionExpired
	}
	if err := b.ready(ctx); err != nil {
		return 0, err
	}
	n, live, err := b.st.joinGroup(ctx, string(s), group)
	if err != nil {
		return 0, b.wrap(fmt.Sprintf("join group %q", group), err)
	}
	if !live {
		return 0, simba.ErrSessionExpired
	}
	return n, nil
}

// LeaveGroup deletes the membership of s in group, if any. One round trip.
func (b *Backend) LeaveGroup(ctx context.Context, s simba.SessionID, group string) error {
	if err := simba.ValidateName(group); err != nil {
		return err
	}
	if !wellFormed(s) {
		return nil
	}
	if err := b.ready(ctx); err != nil {
		return err
	}
	if err := b.st.leaveGroup(ctx, string(s), group); err != nil {
		return b.wrap(fmt.Sprintf("leave group %q", group), err)
	}
	return nil
}

// CloseSession deletes the session row and its memberships in one
// statement, which frees every lease it owned at once (their rows keep the
// old owner id and token, and count as free). Closing an unknown session is
// a no-op. One round trip.
func (b *Backend) CloseSession(ctx context.Context, s simba.SessionID) error {
	if !wellFormed(s) {
		return nil
	}
	if err := b.ready(ctx); err != nil {
		return err
	}
	if err := b.st.closeSession(ctx, string(s)); err != nil {
		return b.wrap("close session", err)
	}
	return nil
}

// cleanupLoop deletes expired sessions every interval until ctx ends.
func (b *Backend) cleanupLoop(ctx context.Context, every time.Duration) {
	defer close(b.bgDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.cleanupRound(ctx, every)
		}
	}
}

// cleanupRound deletes expired sessions in batches, at most
// cleanupMaxBatches of them, within one interval (capped at 30s).
func (b *Backend) cleanupRound(ctx context.Context, every time.Duration) {
	if !b.schemaOK.Load() {
		return // nothing was ever used, or the schema is missing
	}
	ctx, cancel := context.WithTimeout(ctx, min(every, 30*time.Second))
	defer cancel()
	total := 0
	for range cleanupMaxBatches {
		n, err := b.st.cleanup(ctx, cleanupBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("simbasql: cleanup of expired sessions failed", "error", err)
			}
			break
		}
		if n < cleanupBatch {
			break
		}
	}
	if total > 0 {
		b.log.Debug("simbasql: deleted expired sessions", "count", total)
	}
}
