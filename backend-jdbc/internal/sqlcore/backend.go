// Package sqlcore is the engine of the SQL backends: the simba.Backend
// methods, option checks, migrations, the cleanup of expired sessions,
// fences and the masking of secrets, over a Dialect that runs one
// database's statements. It imports no database driver, so that each
// public package links only its own.
package sqlcore

// The public packages' API files come from templates/ (TestGeneratedFiles).
//go:generate go test -run ^TestGeneratedFiles$ -update .

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// CloseTimeout bounds Backend.Close.
const CloseTimeout = 5 * time.Second

// closeTimeout is CloseTimeout, shorter in tests.
var closeTimeout = CloseTimeout

const (
	cleanupBatch      = 500 // sessions deleted per statement
	cleanupMaxBatches = 20  // statements per cleanup round, so a round stays short
	sweepBatch        = 500 // lease rows a sweep looks at per transaction
	listScanFactor    = 4   // lease rows a page of a listing reads, per lease it may return
)

// MinSweepIdle is the shortest idle time Sweep accepts.
const MinSweepIdle = time.Second

// Dialect runs one database's statements. Session ids reaching it are well
// formed, names are valid and, past Prepare, the schema has been checked.
type Dialect interface {
	// Missing returns, in one round trip, this backend's tables that do
	// not exist and, of cols, the columns that do not exist in tables that
	// do.
	Missing(ctx context.Context, cols []Column) (tables []string, columns []Column, err error)
	// Migrate runs stmts, the statements of every migration step, in
	// order.
	Migrate(ctx context.Context, stmts []string) error
	// Prepare readies the statements once the tables exist.
	Prepare(ctx context.Context) error
	// OpenSession inserts the session row; identity is empty when the
	// session carries none.
	OpenSession(ctx context.Context, id string, lease time.Duration, identity string) error
	// KeepAlive renews the session and returns live == false when it is
	// expired or gone. It reads, from one snapshot, the lease rows of
	// names (valid names, any number of them) and returns in tokens those
	// that the session owns, with its token; reply holds the remaining
	// validity and the group counts.
	KeepAlive(ctx context.Context, id string, lease time.Duration, names []string) (reply simba.KeepAliveReply, tokens map[string]uint64, live bool, err error)
	// Acquire returns won when the session owns the lease with token
	// after the call.
	Acquire(ctx context.Context, id, name string) (token uint64, won, live bool, err error)
	// AcquirePermit is the acquire of the slot p.Slot of p.Semaphore, a
	// valid permit: PermitSteps in one transaction.
	AcquirePermit(ctx context.Context, id string, p simba.Permit) (PermitResult, error)
	// Release frees name if the session owns it with token.
	Release(ctx context.Context, id, name string, token uint64) error
	JoinGroup(ctx context.Context, id, group string) (members int, live bool, err error)
	LeaveGroup(ctx context.Context, id, group string) error
	CloseSession(ctx context.Context, id string) error
	// Holder returns the live session that owns name, ok false when the
	// lease has no owner or its owner is not live.
	Holder(ctx context.Context, name string) (h simba.Holder, ok bool, err error)
	// ListHolders reads, in one statement, up to scan lease rows in name
	// order whose names are at least from, above after and below below,
	// and returns those of them that a live session owns, at most limit,
	// in name order, with the last name it read ("" when none) and how
	// many rows it read.
	ListHolders(ctx context.Context, from, after, below string, scan, limit int) (held []simba.HeldLease, last string, scanned int, err error)
	// Cleanup deletes up to limit expired sessions and their memberships.
	Cleanup(ctx context.Context, limit int) (int, error)
	// Sweep looks at up to limit lease rows, in name order after after,
	// and deletes those that no live session owns and whose term began
	// at least idle ago, raising the floor to the highest token deleted
	// in the same transaction. It returns the last name looked at, ""
	// when fewer than limit were left, and the number deleted.
	Sweep(ctx context.Context, idle time.Duration, after string, limit int) (last string, removed int, err error)
	// Undefined returns the server's message when err says that a table
	// (table true) or a column does not exist.
	Undefined(err error) (message string, table, ok bool)
	// Warnings reads the server's settings once a session is open and
	// returns those that break a guarantee of the backend; a failed read
	// returns none, and the next session reads again.
	Warnings(ctx context.Context) []simba.Warning
	// Close releases prepared statements; it never closes the client.
	Close()
}

// Config describes one backend.
type Config struct {
	Pkg      *Pkg
	Database string // "postgres" or "mysql", in log lines
	// Migrations are the schema's steps, in order.
	Migrations []Migration
	Options    Options
	Dialect    func(Tables) Dialect
	// CloseClient closes the client when the backend owns it; nil when
	// the caller does.
	CloseClient func()
}

// Backend implements simba.Backend over a Dialect. It is safe for
// concurrent use.
type Backend struct {
	pkg      *Pkg
	database string
	steps    []Migration
	cols     []Column              // the columns the steps add, expanded
	colStep  []*Migration          // the step adding each of cols
	late     map[string]*Migration // the tables later steps create, expanded
	tables   Tables
	opts     Options
	d        Dialect
	log      *slog.Logger

	closeClient func()

	initSem  chan struct{} // one schema check at a time, ctx-aware
	schemaOK atomic.Bool

	life      context.Context // ends with Close: calls in flight and cleanup
	stop      context.CancelFunc
	closed    atomic.Bool
	closeOnce sync.Once
	bgDone    chan struct{} // nil without cleanup
}

// New resolves cfg.Options and returns the backend; it sends nothing to
// the server.
func New(cfg Config) (*Backend, error) {
	opts, err := cfg.Pkg.Resolve(cfg.Options)
	if err != nil {
		return nil, err
	}
	t := NewTables(opts.TablePrefix)
	life, stop := context.WithCancel(context.Background())
	cols, colStep := columns(cfg.Migrations, t)
	b := &Backend{
		pkg:         cfg.Pkg,
		database:    cfg.Database,
		steps:       cfg.Migrations,
		cols:        cols,
		colStep:     colStep,
		late:        lateTables(cfg.Migrations, t),
		tables:      t,
		opts:        opts,
		d:           cfg.Dialect(t),
		log:         opts.Logger,
		closeClient: cfg.CloseClient,
		initSem:     make(chan struct{}, 1),
		life:        life,
		stop:        stop,
	}
	if opts.CleanupInterval > 0 {
		b.bgDone = make(chan struct{})
		go b.cleanupLoop(opts.CleanupInterval)
	}
	return b, nil
}

// Close ends the calls in flight (they fail with ErrClosed) and the
// cleanup goroutine, and closes the client when the backend owns it. It
// returns within CloseTimeout whatever the server does: a client still
// closing then goes on in the background and Close reports it. Sessions
// are not closed: they expire on the database. Close is idempotent.
func (b *Backend) Close() error {
	var err error
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.stop()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if b.bgDone != nil {
				<-b.bgDone
			}
			b.d.Close()
			if b.closeClient != nil {
				b.closeClient()
			}
		}()
		t := time.NewTimer(closeTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			err = b.pkg.Errorf("close: the database client did not close within %v; it goes on closing in the background", closeTimeout)
		}
	})
	return err
}

// begin checks that b is open and returns ctx, cancelled by Close too.
func (b *Backend) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if b.closed.Load() {
		return nil, nil, b.pkg.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.life, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

// enter is begin, then ready: the context of a call that needs the schema.
func (b *Backend) enter(ctx context.Context) (context.Context, context.CancelFunc, error) {
	ctx, done, err := b.begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := b.ready(ctx); err != nil {
		done()
		return nil, nil, err
	}
	return ctx, done, nil
}

// Migrate creates the missing tables and adds the missing columns with the
// statements of the schema script, every migration step in order. It is
// idempotent.
func (b *Backend) Migrate(ctx context.Context) error { return b.run(ctx, b.migrate) }

func (b *Backend) migrate(ctx context.Context) error {
	stmts, err := b.pkg.DDL(b.steps, b.opts.TablePrefix)
	if err != nil {
		return err
	}
	if err := b.d.Migrate(ctx, stmts); err != nil {
		if b.life.Err() != nil {
			return b.pkg.ErrClosed
		}
		return b.pkg.Errorf("migrate: %w", err)
	}
	latest := 0
	if len(b.steps) > 0 {
		latest = b.steps[len(b.steps)-1].Version
	}
	b.log.Info(b.pkg.Name+": schema ready", "database", b.database, "prefix", b.opts.TablePrefix, "migration", latest)
	return nil
}

// Ready checks the schema (or migrates it) and prepares the statements, as
// the first call does.
func (b *Backend) Ready(ctx context.Context) error { return b.run(ctx, b.ready) }

// run runs fn with the context begin returns.
func (b *Backend) run(ctx context.Context, fn func(context.Context) error) error {
	ctx, done, err := b.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	return fn(ctx)
}

// exec runs fn, a statement that needs the schema, with the context enter
// returns, and wraps its error as operation op's.
func (b *Backend) exec(ctx context.Context, op string, fn func(context.Context) error) error {
	ctx, done, err := b.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := fn(ctx); err != nil {
		return b.wrap(op, err)
	}
	return nil
}

// ready makes sure the schema was checked (or migrated) and the statements
// prepared. It returns at once after the first success; a failure is
// retried by the next call.
func (b *Backend) ready(ctx context.Context) error {
	if b.schemaOK.Load() {
		return nil
	}
	select {
	case b.initSem <- struct{}{}:
	case <-ctx.Done():
		return b.pkg.Errorf("schema check: %w", ctx.Err())
	}
	defer func() { <-b.initSem }()
	if b.schemaOK.Load() {
		return nil
	}
	missing, cols, err := b.d.Missing(ctx, b.cols)
	var first []string // missing tables of the first step
	for _, t := range missing {
		if b.late[t] == nil {
			first = append(first, t)
		}
	}
	switch {
	case err != nil:
		return b.wrap("schema check", err)
	case (len(missing) > 0 || len(cols) > 0) && b.opts.Migrate:
		if err := b.migrate(ctx); err != nil {
			return err
		}
	case len(first) > 0:
		return &MissingTableError{Tables: missing, pkg: b.pkg}
	case len(missing) > 0 || len(cols) > 0:
		e := b.outdated(cols, nil)
		e.Tables = missing
		for _, t := range missing {
			if m := b.late[t]; e.Migration == 0 || m.Version < e.Migration {
				e.Migration, e.Name = m.Version, m.Name
			}
		}
		return e
	}
	if err := b.d.Prepare(ctx); err != nil {
		return b.wrap("prepare", err)
	}
	b.schemaOK.Store(true)
	return nil
}

// wrap turns a driver error of operation op into this package's error:
// ErrClosed when Close ended the call, a *MissingTableError when a table is
// missing, an *OutdatedSchemaError when a column a migration step adds is
// (the schema check is then repeated on the next call, which migrates with
// Options.Migrate), otherwise the driver error wrapped with %w.
func (b *Backend) wrap(op string, err error) error {
	if b.life.Err() != nil {
		return b.pkg.ErrClosed
	}
	if tables := b.missingTables(err); tables != nil {
		b.schemaOK.Store(false)
		return &MissingTableError{Tables: tables, Err: err, pkg: b.pkg}
	}
	if msg, table, ok := b.d.Undefined(err); ok && !table {
		b.schemaOK.Store(false)
		if cols := b.missingColumns(msg); cols != nil {
			return b.outdated(cols, err)
		}
	}
	return b.pkg.Errorf("%s: %w", op, err)
}

// outdated returns the error of tables that lack cols, which are some of
// b.cols: it names the first step adding one of them.
func (b *Backend) outdated(cols []Column, err error) *OutdatedSchemaError {
	var first *Migration
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.String()
		for j, bc := range b.cols {
			if bc == c && (first == nil || b.colStep[j].Version < first.Version) {
				first = b.colStep[j]
			}
		}
	}
	e := &OutdatedSchemaError{Columns: names, Err: err, pkg: b.pkg}
	if first != nil {
		e.Migration, e.Name = first.Version, first.Name
	}
	return e
}

// missingColumns returns the columns of b.cols that msg, a server's
// message about an unknown column, names: "column s.identity does not
// exist" on PostgreSQL, "Unknown column 's.identity' in 'field list'" on
// MySQL. Statements qualify columns with aliases, not table names, so the
// column's name alone decides; nil when msg names none of them.
func (b *Backend) missingColumns(msg string) []Column {
	words := strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool {
		return r != '_' && (r < 'a' || r > 'z') && (r < '0' || r > '9')
	})
	var found []Column
	for _, c := range b.cols {
		if slices.Contains(words, strings.ToLower(c.Name)) {
			found = append(found, c)
		}
	}
	return found
}

// missingTables returns the tables of this backend that err says do not
// exist, nil when err is about something else.
func (b *Backend) missingTables(err error) []string {
	msg, table, ok := b.d.Undefined(err)
	if !ok || !table {
		return nil
	}
	// Quote-delimited in both servers' messages: "simba_lease" on
	// PostgreSQL (folded to lower case), 'db.simba_lease' on MySQL.
	msg = strings.ToLower(msg)
	found := []string{}
	for _, t := range b.tables.All() {
		t = strings.ToLower(t)
		if strings.Contains(msg, `"`+t+`"`) || strings.Contains(msg, "."+t+"'") || strings.Contains(msg, "'"+t+"'") {
			found = append(found, t)
		}
	}
	return found
}

// wellFormed reports whether s could have been made by
// backendkit.NewSessionID. Any other id cannot exist in the table, so it
// is treated as unknown without asking the database.
func wellFormed(s simba.SessionID) bool { return backendkit.ValidSessionID(string(s)) }

func (b *Backend) checkLease(lease time.Duration) error {
	if lease <= 0 || lease > MaxLease {
		return b.pkg.Errorf("lease %v out of range (0, %v]", lease, MaxLease)
	}
	return nil
}

// checkIdentity refuses what simba.WithIdentity refuses, but the empty
// identity, which stores none.
func (b *Backend) checkIdentity(id string) error {
	if id == "" {
		return nil
	}
	if err := backendkit.CheckIdentity(id); err != nil {
		return b.pkg.Errorf("%w: identity: %w", simba.ErrInvalidArgument, err)
	}
	return nil
}

// OpenSession inserts a new session row expiring lease from now (database
// time).
func (b *Backend) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	return b.OpenSessionAs(ctx, lease, "")
}

// OpenSessionAs is OpenSession for a session whose row stores identity,
// which Holder reports; empty, it stores none. A second round trip reads
// the server's settings for the grant's Warnings (Dialect.Warnings). An identity longer than
// simba.MaxIdentity bytes, or not printable UTF-8, fails with an error
// matching simba.ErrInvalidArgument before any statement.
func (b *Backend) OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error) {
	if err := b.checkLease(lease); err != nil {
		return simba.SessionGrant{}, err
	}
	if err := b.checkIdentity(identity); err != nil {
		return simba.SessionGrant{}, err
	}
	ctx, done, err := b.enter(ctx)
	if err != nil {
		return simba.SessionGrant{}, err
	}
	defer done()
	id := backendkit.NewSessionID()
	if err := b.d.OpenSession(ctx, id, lease, identity); err != nil {
		return simba.SessionGrant{}, b.wrap("open session", err)
	}
	// The row expires lease after the statement ran, which is after the
	// caller sent it: reporting lease can only err on the safe side.
	return simba.SessionGrant{ID: simba.SessionID(id), Remaining: lease, Warnings: b.d.Warnings(ctx)}, nil
}

// KeepAlive renews s unless it expired or was closed
// (simba.ErrSessionExpired), and reports in the same statement which of
// the leases it checks s lost, which of req.Unsure s owns, and the group
// counts. It checks every lease of req.Held, or simba.MinLeaseChecks of
// them (the first of a map iteration, whose order Go varies), so that it
// reads as many lease rows with thousands of leases held as with five.
func (b *Backend) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	if err := b.checkLease(req.Lease); err != nil {
		return simba.KeepAliveReply{}, err
	}
	if !wellFormed(s) {
		return simba.KeepAliveReply{}, simba.ErrSessionExpired
	}
	ctx, done, err := b.enter(ctx)
	if err != nil {
		return simba.KeepAliveReply{}, err
	}
	defer done()
	checked := make([]string, 0, min(len(req.Held), simba.MinLeaseChecks))
	for name := range req.Held {
		if len(checked) == simba.MinLeaseChecks {
			break
		}
		checked = append(checked, name)
	}
	// A name no acquire takes is owned by nobody: not looked up.
	names := make([]string, 0, len(checked)+len(req.Unsure))
	for _, name := range checked {
		if simba.ValidateName(name) == nil {
			names = append(names, name)
		}
	}
	for _, name := range req.Unsure {
		if simba.ValidateName(name) == nil && !slices.Contains(checked, name) {
			names = append(names, name)
		}
	}
	reply, tokens, live, err := b.d.KeepAlive(ctx, string(s), req.Lease, names)
	if err != nil {
		return simba.KeepAliveReply{}, b.wrap("keep-alive", err)
	}
	if !live {
		return simba.KeepAliveReply{}, simba.ErrSessionExpired
	}
	for _, name := range checked {
		if tokens[name] != req.Held[name] {
			reply.Lost = append(reply.Lost, name)
		}
	}
	for _, name := range req.Unsure {
		if tok, ok := tokens[name]; ok {
			if reply.Owned == nil {
				reply.Owned = map[string]uint64{}
			}
			reply.Owned[name] = tok
		}
	}
	return reply, nil
}

// Acquire makes s the owner of name when the lease is free or already
// s's, with a new token.
func (b *Backend) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	return b.acquire(ctx, s, simba.ValidateName(name), func(ctx context.Context) (simba.AcquireResult, error) {
		token, won, live, err := b.d.Acquire(ctx, string(s), name)
		if err != nil {
			return simba.AcquireResult{}, b.wrap(fmt.Sprintf("acquire %q", name), err)
		}
		return acquired(PermitResult{Token: token, Won: won, Live: live})
	})
}

// acquire runs fn, an acquire by s, once the checks every acquire shares
// passed: invalid, the error of the name's validation, is nil, and s is a
// session id (a malformed one is no live session).
func (b *Backend) acquire(ctx context.Context, s simba.SessionID, invalid error, fn func(context.Context) (simba.AcquireResult, error)) (simba.AcquireResult, error) {
	if invalid != nil {
		return simba.AcquireResult{}, invalid
	}
	if !wellFormed(s) {
		return simba.AcquireResult{}, simba.ErrSessionExpired
	}
	ctx, done, err := b.enter(ctx)
	if err != nil {
		return simba.AcquireResult{}, err
	}
	defer done()
	return fn(ctx)
}

// acquired returns the result of an acquire that ended with r.
func acquired(r PermitResult) (simba.AcquireResult, error) {
	switch {
	case !r.Live:
		return simba.AcquireResult{}, simba.ErrSessionExpired
	case !r.Won:
		return simba.AcquireResult{}, nil
	}
	return simba.AcquireResult{Won: true, Token: r.Token}, nil
}

// AcquirePermit is Acquire of slot p.Slot of the semaphore p.Semaphore,
// in one transaction that also checks and records the semaphore's
// permits and keeps its tokens increasing (see PermitSteps). While a live
// session owns a slot of the recorded permits, a call with another
// p.Permits fails with an error matching simba.ErrPermitsMismatch that
// names both numbers.
func (b *Backend) AcquirePermit(ctx context.Context, s simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	return b.acquire(ctx, s, simba.ValidatePermit(p), func(ctx context.Context) (simba.AcquireResult, error) {
		name := simba.PermitName(p.Semaphore, p.Slot)
		r, err := b.d.AcquirePermit(ctx, string(s), p)
		switch {
		case err != nil:
			return simba.AcquireResult{}, b.wrap(fmt.Sprintf("acquire permit %q", name), err)
		case r.Recorded != 0:
			return simba.AcquireResult{}, b.pkg.Errorf("acquire permit %q: semaphore %q holds permits granted under %d, asked with %d: %w",
				name, p.Semaphore, r.Recorded, p.Permits, simba.ErrPermitsMismatch)
		}
		return acquired(r)
	})
}

// Release frees name if s owns it with exactly token.
func (b *Backend) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	if err := simba.ValidateName(name); err != nil {
		return err
	}
	if !wellFormed(s) || token == 0 || token > 1<<63-1 {
		return nil
	}
	return b.exec(ctx, fmt.Sprintf("release %q", name), func(ctx context.Context) error {
		return b.d.Release(ctx, string(s), name, token)
	})
}

// ReleaseWatcher is implemented by a Dialect whose database broadcasts
// releases (PostgreSQL's LISTEN/NOTIFY).
type ReleaseWatcher interface {
	// Listen registers a watch of name until ctx ends: fired is closed
	// when a release of name may have been broadcast (spurious wake-ups
	// are allowed), ready once the broadcasts are received; drop removes
	// the watch. It fails with an error matching simba.ErrNotSupported
	// while the broadcasts do not reach the backend.
	Listen(ctx context.Context, name string) (fired, ready <-chan struct{}, drop func(), err error)
	// Watch asks the next release of name to be broadcast and reports
	// whether a live session owns the lease now.
	Watch(ctx context.Context, name string) (held bool, err error)
	// ListenError is why the last attempt to receive the broadcasts
	// failed, or nil once they are received.
	ListenError() error
}

// WatchWait bounds WatchRelease's wait for the broadcasts to be received
// and its statement.
const WatchWait = 5 * time.Second

// closedChan is a channel that is closed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// WatchRelease returns a channel that is closed once name may have been
// released (simba.ReleaseNotifier): the watch is registered, then, once
// the broadcasts are received, the lease row is marked watched in a
// statement that reports whether it is held; a lease that is not is
// reported at once. The watch is dropped when ctx is done. It fails with
// simba.ErrNotSupported on a database without broadcasts, and with an
// error matching it while the broadcasts do not reach the backend.
func (b *Backend) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	if err := simba.ValidateName(name); err != nil {
		return nil, err
	}
	w, ok := b.d.(ReleaseWatcher)
	if !ok {
		return nil, simba.ErrNotSupported
	}
	sctx, done, err := b.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	sctx, cancel := context.WithTimeout(sctx, WatchWait)
	defer cancel()
	fired, ready, drop, err := w.Listen(ctx, name)
	if err != nil {
		return nil, b.pkg.Errorf("watch %q: %w", name, err)
	}
	select {
	case <-ready:
	case <-fired:
		return fired, nil
	case <-sctx.Done():
		drop()
		why := ""
		if lerr := w.ListenError(); lerr != nil {
			why = fmt.Sprintf(" (last attempt: %v)", lerr)
		}
		return nil, b.pkg.Errorf("watch %q: no connection receives the broadcasts yet%s: %w", name, why, sctx.Err())
	}
	held, err := w.Watch(sctx, name)
	switch {
	case err != nil:
		drop()
		return nil, b.wrap(fmt.Sprintf("watch %q", name), err)
	case !held:
		drop()
		return closedChan, nil
	}
	return fired, nil
}

// JoinGroup records s as a member of group and returns the live members.
func (b *Backend) JoinGroup(ctx context.Context, s simba.SessionID, group string) (int, error) {
	if err := simba.ValidateName(group); err != nil {
		return 0, err
	}
	if !wellFormed(s) {
		return 0, simba.ErrSessionExpired
	}
	ctx, done, err := b.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	n, live, err := b.d.JoinGroup(ctx, string(s), group)
	if err != nil {
		return 0, b.wrap(fmt.Sprintf("join group %q", group), err)
	}
	if !live {
		return 0, simba.ErrSessionExpired
	}
	return n, nil
}

// LeaveGroup deletes the membership of s in group, if any.
func (b *Backend) LeaveGroup(ctx context.Context, s simba.SessionID, group string) error {
	if err := simba.ValidateName(group); err != nil {
		return err
	}
	if !wellFormed(s) {
		return nil
	}
	return b.exec(ctx, fmt.Sprintf("leave group %q", group), func(ctx context.Context) error {
		return b.d.LeaveGroup(ctx, string(s), group)
	})
}

// CloseSession deletes the session and its memberships, which frees every
// lease it owned.
func (b *Backend) CloseSession(ctx context.Context, s simba.SessionID) error {
	if !wellFormed(s) {
		return nil
	}
	return b.exec(ctx, "close session", func(ctx context.Context) error { return b.d.CloseSession(ctx, string(s)) })
}

// Holder returns the session that owns name and is live by the database
// clock, with its identity, the token of its term and when the term
// began; ok is false when nobody does. It returns a *simba.NameError for
// an invalid name.
func (b *Backend) Holder(ctx context.Context, name string) (simba.Holder, bool, error) {
	if err := simba.ValidateName(name); err != nil {
		return simba.Holder{}, false, err
	}
	ctx, done, err := b.enter(ctx)
	if err != nil {
		return simba.Holder{}, false, err
	}
	defer done()
	h, ok, err := b.d.Holder(ctx, name)
	if err != nil {
		return simba.Holder{}, false, b.wrap(fmt.Sprintf("holder of %q", name), err)
	}
	return h, ok, nil
}

// ListHolders returns a page of the leases whose names start with
// q.Prefix and that a session live by the database clock owns, in name
// order after q.Cursor (the last name of a page before). One statement
// reads at most 4 × q.Limit lease rows from the primary key's index, the
// range of the prefix after the cursor, and the session row of each that
// names one, so a page costs the same on a table of any size, however
// few of its rows are held: a page may then hold fewer than q.Limit
// leases, or none, and have a next one. It reads a snapshot, without
// locks, as Holder does. It fails with an error matching
// simba.ErrInvalidArgument for a query simba.ValidateListQuery refuses or
// a cursor that is not a lease name.
func (b *Backend) ListHolders(ctx context.Context, q simba.ListQuery) (simba.HolderPage, error) {
	if err := simba.ValidateListQuery(q); err != nil {
		return simba.HolderPage{}, err
	}
	if q.Cursor != "" && simba.ValidateName(q.Cursor) != nil {
		return simba.HolderPage{}, b.pkg.Errorf("%w: list cursor %.40q is not a lease name", simba.ErrInvalidArgument, q.Cursor)
	}
	ctx, done, err := b.enter(ctx)
	if err != nil {
		return simba.HolderPage{}, err
	}
	defer done()
	scan := listScanFactor * q.Limit
	held, last, scanned, err := b.d.ListHolders(ctx, q.Prefix, q.Cursor, PrefixEnd(q.Prefix), scan, q.Limit)
	if err != nil {
		return simba.HolderPage{}, b.wrap("list holders", err)
	}
	p := simba.HolderPage{Leases: held}
	switch {
	case len(held) == q.Limit && last > held[len(held)-1].Name:
		p.Next = held[len(held)-1].Name // rows after it were read, not returned
	case scanned == scan:
		p.Next = last // the range may go on
	}
	return p, nil
}

// PrefixEnd returns the least string above every lease name that starts
// with prefix: prefix with its last byte raised by one, or "{" (above
// 'z', the highest byte a name holds) for the empty prefix. The prefix is
// valid (simba.ValidatePrefix), so every byte of the result is ASCII.
func PrefixEnd(prefix string) string {
	if prefix == "" {
		return "{"
	}
	return prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
}

// Sweep deletes the lease rows of names that no live session owns and
// whose last term began at least idle ago (by the database clock), and
// returns how many it deleted. It walks the lease table in name order,
// sweepBatch rows per transaction, each of which raises the floor to the
// highest token it deleted; a name without a row starts its next term
// above the floor, so its tokens keep increasing. An idle below
// MinSweepIdle fails with an error matching simba.ErrInvalidArgument.
// When ctx ends, the batches committed stay committed. A batch's lock
// waits are bounded on the server below ctx's deadline (see WaitBound): a
// batch that reaches the bound is rolled back, and Sweep returns what the
// batches before it removed with an error matching
// context.DeadlineExceeded.
func (b *Backend) Sweep(ctx context.Context, idle time.Duration) (int, error) {
	if idle < MinSweepIdle {
		return 0, b.pkg.Errorf("%w: sweep idle %v: must be at least %v", simba.ErrInvalidArgument, idle, MinSweepIdle)
	}
	ctx, done, err := b.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	removed, after := 0, ""
	for {
		last, n, err := b.d.Sweep(ctx, idle, after, sweepBatch)
		removed += n
		if err != nil {
			return removed, b.wrap("sweep", err)
		}
		if last == "" {
			if removed > 0 {
				b.log.Debug(b.pkg.Name+": swept idle leases", "count", removed)
			}
			return removed, nil
		}
		after = last
	}
}

// cleanupLoop deletes expired sessions every interval until Close.
func (b *Backend) cleanupLoop(every time.Duration) {
	defer close(b.bgDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.life.Done():
			return
		case <-t.C:
			b.CleanupRound(b.life, every)
		}
	}
}

// CleanupRound deletes expired sessions in batches, at most
// cleanupMaxBatches of them, within one interval (capped at 30s). The
// cleanup goroutine calls it every interval.
func (b *Backend) CleanupRound(ctx context.Context, every time.Duration) {
	if !b.schemaOK.Load() {
		return // nothing was ever used, or the schema is missing
	}
	ctx, cancel := context.WithTimeout(ctx, min(every, 30*time.Second))
	defer cancel()
	total := 0
	for range cleanupMaxBatches {
		n, err := b.d.Cleanup(ctx, cleanupBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn(b.pkg.Name+": cleanup of expired sessions failed", "error", err)
			}
			break
		}
		if n < cleanupBatch {
			break
		}
	}
	if total > 0 {
		b.log.Debug(b.pkg.Name+": deleted expired sessions", "count", total)
	}
}
