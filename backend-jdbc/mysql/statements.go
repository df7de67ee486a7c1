package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

// MySQL / MariaDB statements. Times are UTC DATETIME(6) values compared
// with UTC_TIMESTAMP(6), which MySQL fixes when a statement starts.
//
// That makes the clock stale in any statement that waits for a row lock:
// the locked row is its latest version, read after the wait, but it is
// compared with the time from before it. So a statement that must not
// treat an expired session as live never decides that from a row it may
// have had to wait for:
//   - the keep-alive locks its session row first (SELECT ... FOR UPDATE in
//     a transaction) and renews it in a later statement, whose clock starts
//     once the lock is held;
//   - an acquire that won confirms afterwards, with a statement of its own,
//     that the caller is still live: a session that was expired when the
//     row was locked can no longer be renewed, so live afterwards means
//     live then. That statement, a plain read, starts after the win was
//     written, so its clock is an instant after the win and its snapshot
//     holds the session row's latest committed version: if the session is
//     live by that clock, it was live when it won;
//   - where a stale clock only errs towards "live" for another session
//     (the owner judged by a take-over, the expired sessions cleanup
//     deletes), it can only delay a take-over or a deletion, never allow a
//     wrong one.
//
// A statement that locks the caller's session row names it by primary key
// and says FORCE INDEX (PRIMARY): with a condition on expires_at too, the
// optimizer may scan the expires_at index instead (it does on small
// tables), locking that index's entries before the row, in the opposite
// order of a statement that found the row by key first, and two such
// statements of one session deadlock.
//
// Plain reads (no lock) read a snapshot taken when the statement starts,
// the same instant as its clock. SYSDATE(6), evaluated when it is called,
// is not compared with: --sysdate-is-now turns it into NOW() without a
// trace, and it returns the session's time zone, not UTC. It only dates
// the start of a term won after a lock wait (myAfterLocks).
//
// Where ownership is decided (UPDATE ... JOIN, INSERT ... SELECT) InnoDB
// reads the joined rows with shared locks, that is their latest committed
// version, never a stale REPEATABLE READ snapshot.
// myAfterLocks is the UTC time at which it is evaluated, after the row
// locks the statement waited for: its start (UTC_TIMESTAMP(6)) plus the
// time since (SYSDATE(6) - NOW(6), both in the session's time zone, so
// that it cancels). A term won after a wait is stamped with it: stamped
// with the statement's start, it began the whole wait earlier, and
// Holder's Since and a sweep's idle were off by that much. Never earlier
// than the start: with --sysdate-is-now, or across a change of the
// session's offset from UTC during the statement that sets the clock
// back, the difference is zero or negative and the start is used; one
// that moves it forward stamps a term later, which only keeps it longer
// from a sweep. Unsafe for statement-based replication, as
// LAST_INSERT_ID(expr) is not: with binlog_format=MIXED (the default) the
// server logs the change as a row instead.
const myAfterLocks = `UTC_TIMESTAMP(6) + INTERVAL GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)), 0) MICROSECOND`

const (
	myOpenSession = `INSERT INTO {session} (id, expires_at, created_at, identity)
VALUES (?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), ?)`

	// Run in one transaction: myLockSession waits for whoever holds the
	// row, then myRenew compares with a clock started after the wait.
	myLockSession = `SELECT id FROM {session} WHERE id = ? FOR UPDATE`

	myRenew = `UPDATE {session} FORCE INDEX (PRIMARY) SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)`

	// Take over an existing row in one statement: the current owner must
	// be absent, expired or the caller itself. The lease row is locked
	// exclusively first, then the owner's session row in share mode, so a
	// keep-alive of the owner in flight is waited for and one arriving
	// later waits and then finds the session expired. LAST_INSERT_ID(expr)
	// hands the new token back in the OK packet: no second read. The
	// caller's own session row is neither read nor locked: the statement
	// may wait for the lease row (another take-over, a release, a user's
	// transaction holding it), and a share lock on the caller's row held
	// meanwhile would make the caller's keep-alive wait behind it, and
	// behind it again after the caller gave up (the server goes on with a
	// statement whose client left). Whether the caller is live is decided
	// by confirm, afterwards: a take-over by a caller that is not leaves
	// the row naming an expired session, a free lease, and uses a token up.
	// The new token is also above the second parameter, the token of the
	// semaphore's record for a permit's slot (0 otherwise), as the third
	// is in myInsertLease.
	myTakeOver = `UPDATE {lease} l
LEFT JOIN {session} o ON o.id = l.session_id AND o.id <> ? AND o.expires_at > UTC_TIMESTAMP(6)
SET l.token = LAST_INSERT_ID(GREATEST(l.token, ?) + 1), l.session_id = ?, l.acquired_at = ` + myAfterLocks + `
WHERE l.name = ? AND o.id IS NULL`

	// Why myTakeOver changed nothing: caller not live, or row held (its
	// token, NULL without a row). Also run after a win, to confirm that the
	// caller is still live (see above) and, after a first insert, to read
	// its token: a plain read, whose snapshot starts after the win was
	// written and holds the latest committed versions.
	myAcquireState = `SELECT
    EXISTS (SELECT 1 FROM {session} WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)),
    (SELECT token FROM {lease} WHERE name = ?)`

	// First term of a name without a row, one above the floor: a
	// concurrent first insert wins and this one is ignored (0 rows). The
	// floor is read with an explicit LOCK IN SHARE MODE, a locking read at
	// every isolation level, which waits for a sweep holding the floor and
	// returns its latest committed version. Left to the isolation level,
	// the read would lock only at REPEATABLE READ: at READ COMMITTED an
	// INSERT ... SELECT reads its sources from the statement's snapshot,
	// and a sweep that removed the name's row (a term begun and given back
	// since myAcquireState) and committed while the insert waited for that
	// row would leave the insert the floor from before, and that term's
	// token. The caller's session row is not read: at REPEATABLE READ that
	// read would share-lock it for as long as the insert waits, and the
	// caller's keep-alive would wait behind it. confirm checks afterwards
	// that the caller is live; a row inserted for a caller that is not
	// names an expired session, which leaves the lease free.
	myInsertLease = `INSERT IGNORE INTO {lease} (name, session_id, token, acquired_at)
VALUES (?, ?, GREATEST(COALESCE((SELECT token FROM {floor} WHERE id = 1 LOCK IN SHARE MODE), 0), ?) + 1, ` + myAfterLocks + `)`

	// A sweep, in a READ COMMITTED transaction: mySweepLock locks the
	// floor row first, so that sweeps queue and a first insert, which
	// reads the floor, waits for the sweep's commit rather than
	// interleaving with it; mySweepRead reads the next rows in name order,
	// their owners and whether each is idle (no live owner, term begun at
	// least the given µs ago); mySweepDelete (completed with one (name, token) pair
	// per idle row) deletes those still idle with the token read, and
	// mySweepRaise raises the floor to the highest token among them.
	mySweepLock = `SELECT token FROM {floor} WHERE id = 1 FOR UPDATE`

	mySweepRead = `SELECT l.name, l.token, l.session_id, l.acquired_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
    AND NOT EXISTS (SELECT 1 FROM {session} s WHERE s.id = l.session_id AND s.expires_at > UTC_TIMESTAMP(6))
FROM {lease} l WHERE l.name > ? ORDER BY l.name LIMIT ?`

	// mySweepOwners locks, before the delete, the sessions owning the rows
	// about to go (LOCK IN SHARE MODE, as a take-over locks the holder):
	// the lock waits for a keep-alive in flight, and the delete's own read
	// of the session (a new read view under READ COMMITTED) then sees the
	// renewal, instead of the expiry before it, and keeps the lease.
	// Whether the delete's subquery would lock by itself depends on the
	// server's settings (MariaDB's did on the test server); this does not.
	// It locks the session rows alone, named by the ids mySweepRead
	// returned: reading them through a join with the lease rows also
	// share-locked those, and the delete's exclusive lock on a row whose
	// release or take-over queued meanwhile was a deadlock, which failed
	// the release. The delete takes only rows with the token read, whose
	// owner is the one locked here or none (a release keeps the token; a
	// take-over raises it).
	mySweepOwners = `SELECT id FROM {session} WHERE id IN (%s) LOCK IN SHARE MODE`

	mySweepDelete = `DELETE FROM {lease} WHERE (name, token) IN (%s)
AND acquired_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
AND NOT EXISTS (SELECT 1 FROM {session} s WHERE s.id = {lease}.session_id AND s.expires_at > UTC_TIMESTAMP(6))`

	mySweepRaise = `UPDATE {floor} SET token = GREATEST(token, ?) WHERE id = 1`

	// A permit acquire's statements, in one READ COMMITTED transaction
	// (sqlcore.PermitSteps) with myTakeOver, myAcquireState and
	// myInsertLease. mySemInsert inserts the semaphore's record or, when
	// it exists, locks it exclusively (a duplicate key of ON DUPLICATE KEY
	// UPDATE is locked so, never in share mode, which two acquires would
	// each hold and then both wait to raise); mySemLock reads it, locked.
	// mySlotOwners, a plain read begun after that lock, gives the owners of
	// the slots, and mySlotsHeld (completed with a placeholder per owner)
	// locks their session rows in share mode, as a take-over locks the
	// holder: a keep-alive in flight is waited for and its renewal read. Its
	// clock may be stale after that wait, which only counts an owner that
	// expired meanwhile as live and refuses the call.
	mySemInsert = `INSERT INTO {semaphore} (name, permits, token) VALUES (?, ?, 0) ON DUPLICATE KEY UPDATE name = name`

	mySemLock = `SELECT permits, token FROM {semaphore} WHERE name = ? FOR UPDATE`

	mySemSet = `UPDATE {semaphore} SET permits = ?, token = ? WHERE name = ?`

	mySlotOwners = `SELECT DISTINCT session_id FROM {lease} WHERE session_id IS NOT NULL AND name IN (%s)`

	mySlotsHeld = `SELECT id FROM {session} WHERE expires_at > UTC_TIMESTAMP(6) AND id IN (%s) LOCK IN SHARE MODE`

	// Frees the lease if the session owns it with the token: it locks the
	// lease row alone.
	myRelease = `UPDATE {lease} SET session_id = NULL WHERE name = ? AND session_id = ? AND token = ?`

	// The caller's liveness is judged here with the statement's clock,
	// possibly stale after a lock wait; myGroupState, the next statement,
	// decides the answer with a fresh one. A membership row of a session
	// that turns out expired is never counted and goes with the session.
	myJoinGroup = `INSERT IGNORE INTO {member} (group_name, session_id, joined_at)
SELECT ?, id, UTC_TIMESTAMP(6) FROM {session} FORCE INDEX (PRIMARY) WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)`

	myGroupState = `SELECT
    EXISTS (SELECT 1 FROM {session} WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)),
    (SELECT COUNT(*) FROM {member} m JOIN {session} o ON o.id = m.session_id
     WHERE m.group_name = ? AND o.expires_at > UTC_TIMESTAMP(6))`

	myLeaveGroup = `DELETE FROM {member} WHERE group_name = ? AND session_id = ?`

	// A multi-table DELETE removes the session and its memberships
	// atomically.
	myCloseSession = `DELETE s, g FROM {session} s LEFT JOIN {member} g ON g.session_id = s.id WHERE s.id = ?`

	// The owner of a lease if its session is live: a plain read, which
	// waits for no lock, of the snapshot taken when the statement starts,
	// the instant of its UTC_TIMESTAMP(6). The start of the term is sent
	// as microseconds since the epoch, so that it reads the same whatever
	// the client's parseTime and loc. No row: no owner (released), or an
	// owner expired, closed or cleaned up.
	myHolder = `SELECT s.id, s.identity, l.token, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', l.acquired_at)
FROM {lease} l JOIN {session} s ON s.id = l.session_id
WHERE l.name = ? AND s.expires_at > UTC_TIMESTAMP(6)`

	// One page of a listing, a plain read as myHolder: b reads the next
	// rows of the name range [?, ?) above ? from the primary key, at most
	// ?; the first branch keeps those a live session owns, at most ?, and
	// the second gives the last name b read and how many rows it read (its
	// session NULL).
	myListHolders = `WITH b AS (
    SELECT name, session_id, token, acquired_at FROM {lease}
    WHERE name >= ? AND name > ? AND name < ? ORDER BY name LIMIT ?
)
(SELECT b.name, s.id, s.identity, b.token, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', b.acquired_at)
 FROM b JOIN {session} s ON s.id = b.session_id
 WHERE s.expires_at > UTC_TIMESTAMP(6) ORDER BY b.name LIMIT ?)
UNION ALL
(SELECT MAX(name), NULL, NULL, COUNT(*), NULL FROM b)`

	myExpired = `SELECT id FROM {session} WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT ?`

	// Completed with one placeholder per id; expiry is checked again, on
	// the locked rows with the statement's clock: stale after a lock wait,
	// which only spares a session renewed or expired meanwhile until the
	// next round.
	myDeleteSessions = `DELETE s, g FROM {session} s LEFT JOIN {member} g ON g.session_id = s.id
WHERE s.expires_at < UTC_TIMESTAMP(6) AND s.id IN (%s)`
)

// myKeepAliveRead returns the read that follows myRenew, with n name
// placeholders. Kinds as on PostgreSQL: 0 remaining µs, 1 a lease name
// (NULL when unused: no row) and the session's token of it, 0 when its
// row does not name the session, one row per name, each looked up by its
// primary key alone (the session is compared in the select list, as on
// PostgreSQL), 2 group count. No kind-0 row means the session is not live.
// All of it is one snapshot.
func myKeepAliveRead(n int) string {
	return `SELECT 0, CAST(NULL AS CHAR(128) CHARACTER SET ascii),
    TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {session} WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)
UNION ALL
SELECT 1, c.name, COALESCE((SELECT IF(l.session_id = ?, l.token, 0) FROM {lease} l WHERE l.name = c.name), 0) FROM (
SELECT CAST(? AS CHAR(128) CHARACTER SET ascii) COLLATE ascii_bin AS name` +
		strings.Repeat(`
UNION ALL SELECT CAST(? AS CHAR(128) CHARACTER SET ascii) COLLATE ascii_bin`, n-1) + `
) c WHERE c.name IS NOT NULL
UNION ALL
SELECT 2, g.group_name, (
    SELECT COUNT(*) FROM {member} m JOIN {session} o ON o.id = m.session_id
    WHERE m.group_name = g.group_name AND o.expires_at > UTC_TIMESTAMP(6)
) FROM {member} g WHERE g.session_id = ?`
}

// myStmt names the prepared statements of dialect.
type myStmt int

const (
	stOpen myStmt = iota
	stLockSession
	stRenew
	stKeepAliveRead
	stTakeOver
	stAcquireState
	stInsertLease
	stRelease
	stJoin
	stGroupState
	stLeave
	stClose
	stHolder
	stListHolders
	stExpired
	stSemInsert
	stSemLock
	stSemSet
	stCount
)

var myStatements = [stCount]string{
	stOpen:          myOpenSession,
	stLockSession:   myLockSession,
	stRenew:         myRenew,
	stKeepAliveRead: myKeepAliveRead(simba.MinLeaseChecks),
	stTakeOver:      myTakeOver,
	stAcquireState:  myAcquireState,
	stInsertLease:   myInsertLease,
	stRelease:       myRelease,
	stJoin:          myJoinGroup,
	stGroupState:    myGroupState,
	stLeave:         myLeaveGroup,
	stClose:         myCloseSession,
	stHolder:        myHolder,
	stListHolders:   myListHolders,
	stExpired:       myExpired,
	stSemInsert:     mySemInsert,
	stSemLock:       mySemLock,
	stSemSet:        mySemSet,
}

// dialect runs the statements above, prepared: without them database/sql would
// prepare, execute and close every parameterised statement (two round
// trips). A *sql.Stmt is prepared again transparently on each new
// connection.
type dialect struct {
	db *sql.DB
	t  sqlcore.Tables

	mu         sync.Mutex
	stmts      []*sql.Stmt // nil until Prepare succeeded
	boundStmts map[boundKey]*sql.Stmt
	mariadb    bool // the server takes SET STATEMENT (see bound.go)
	closed     bool // no statement is prepared any more
}

func newDialect(db *sql.DB, t sqlcore.Tables) *dialect { return &dialect{db: db, t: t} }

var errNotPrepared = errors.New("statements not prepared")

func (s *dialect) stmt(k myStmt) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stmts == nil {
		return nil, errNotPrepared
	}
	return s.stmts[k], nil
}

// deadlockRetries bounds the runs of a statement that InnoDB chose as the
// victim of a deadlock.
const deadlockRetries = 3

// deadlock reports whether err is ER_LOCK_DEADLOCK (1213): InnoDB rolled
// the transaction back, so running it again is safe.
func deadlock(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == 1213
}

// exec runs statement k, in autocommit, again if InnoDB rolled it back to
// break a deadlock. Share locks of plain autocommit statements (the
// session rows an acquire joins, the gaps of a name not yet inserted) can
// form a cycle with a waiting exclusive lock (a keep-alive, a release),
// which InnoDB detects at once.
func (s *dialect) exec(ctx context.Context, k myStmt, args ...any) (sql.Result, error) {
	for i := 1; ; i++ {
		st, err := s.bounded(ctx, k)
		if err != nil {
			return nil, err
		}
		res, err := st.ExecContext(ctx, args...)
		if i < deadlockRetries && deadlock(err) && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}

func (s *dialect) query(ctx context.Context, k myStmt, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(k)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// scanRow runs statement k and scans its single row into dest.
func (s *dialect) scanRow(ctx context.Context, k myStmt, dest []any, args ...any) error {
	st, err := s.stmt(k)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

// Missing reads the columns of the tables in one statement. Names are
// compared case-insensitively, as information_schema compares them where
// lower_case_table_names folds table names.
func (s *dialect) Missing(ctx context.Context, cols []sqlcore.Column) ([]string, []sqlcore.Column, error) {
	tables := s.t.All()
	args := make([]any, len(tables))
	for i, t := range tables {
		args[i] = t
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(tables)), ",")
	rows, err := s.db.QueryContext(ctx,
		`SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name IN (`+marks+`)`,
		args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	seen := map[string]bool{}    // lower-case table names
	have := map[[2]string]bool{} // lower-case table and column names
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			return nil, nil, err
		}
		t, c = strings.ToLower(t), strings.ToLower(c)
		seen[t] = true
		have[[2]string{t, c}] = true
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var missing []string
	for _, t := range tables {
		if !seen[strings.ToLower(t)] {
			missing = append(missing, t)
		}
	}
	var lacking []sqlcore.Column
	for _, c := range cols {
		t := strings.ToLower(c.Table)
		if seen[t] && !have[[2]string{t, strings.ToLower(c.Name)}] {
			lacking = append(lacking, c)
		}
	}
	return missing, lacking, nil
}

// Migrate runs the statements on one connection, which the user variable
// and the prepared statement of migration 2 need. A column that a
// concurrent migration added between the check and the ALTER TABLE
// (ER_DUP_FIELDNAME) is what the step wanted: it is not an error.
func (s *dialect) Migrate(ctx context.Context, stmts []string) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			var myErr *mysql.MySQLError
			if errors.As(err, &myErr) && myErr.Number == 1060 {
				continue
			}
			return fmt.Errorf("%.60s...: %w", q, err)
		}
	}
	return nil
}

func (s *dialect) Prepare(ctx context.Context) error {
	var version string
	if err := s.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return err
	}
	stmts := make([]*sql.Stmt, stCount)
	for k, q := range myStatements {
		st, err := s.db.PrepareContext(ctx, s.t.Expand(q))
		if err != nil {
			for _, p := range stmts[:k] {
				p.Close()
			}
			return err
		}
		stmts[k] = st
	}
	s.mu.Lock()
	old, oldBound := s.stmts, s.boundStmts
	s.stmts, s.boundStmts = stmts, map[boundKey]*sql.Stmt{}
	s.mariadb = strings.Contains(version, "MariaDB")
	s.mu.Unlock()
	closeStmts(old, oldBound)
	return nil
}

// Close closes the statements; a call still running with one fails with
// an error, never a panic.
func (s *dialect) Close() {
	s.mu.Lock()
	old, oldBound := s.stmts, s.boundStmts
	s.boundStmts, s.closed = map[boundKey]*sql.Stmt{}, true
	s.mu.Unlock()
	closeStmts(old, oldBound)
}

// closeStmts closes statements that no call takes any more.
func closeStmts(stmts []*sql.Stmt, bound map[boundKey]*sql.Stmt) {
	for _, p := range stmts {
		p.Close()
	}
	for _, p := range bound {
		p.Close()
	}
}

func (s *dialect) OpenSession(ctx context.Context, id string, lease time.Duration, identity string) error {
	_, err := s.exec(ctx, stOpen, id, sqlcore.Micros(lease), identity)
	return err
}

// KeepAlive renews the session in a transaction that first locks its row
// and then renews it in a second statement, so that liveness is judged
// with the time at which the row was locked (see the statements above),
// and then reads the reply: five round trips (begin, lock, renew, commit,
// read). The renewal's row count is not trusted (clientFoundRows changes
// it, and an unchanged value counts as zero): the read says whether the
// session is live, and an expired session can no longer be renewed in
// between.
func (s *dialect) KeepAlive(ctx context.Context, id string, lease time.Duration, names []string) (simba.KeepAliveReply, map[string]uint64, bool, error) {
	err := s.renew(ctx, id, lease)
	for i := 1; i < deadlockRetries && deadlock(err) && ctx.Err() == nil; i++ {
		err = s.renew(ctx, id, lease) // rolled back: nothing was renewed
	}
	if err != nil {
		return simba.KeepAliveReply{}, nil, false, err
	}
	slots := max(len(names), simba.MinLeaseChecks)
	args := make([]any, 0, slots+3)
	args = append(args, id, id)
	for i := range slots {
		if i < len(names) {
			args = append(args, names[i])
		} else {
			args = append(args, nil)
		}
	}
	args = append(args, id)
	var rows *sql.Rows
	if slots == simba.MinLeaseChecks {
		rows, err = s.query(ctx, stKeepAliveRead, args...) //nolint:rowserrcheck // ReadKeepAlive checks rows.Err and closes rows
	} else {
		// More unsure names than the prepared statement holds: rare (a
		// call ended without its outcome), and prepared for this call only.
		rows, err = s.db.QueryContext(ctx, s.t.Expand(myKeepAliveRead(slots)), args...) //nolint:rowserrcheck // as above
	}
	if err != nil {
		return simba.KeepAliveReply{}, nil, false, err
	}
	return sqlcore.ReadKeepAlive(sqlcore.SQLRows{Rows: rows}, len(names))
}

// renew locks the session row, then renews it if it is still live.
func (s *dialect) renew(ctx context.Context, id string, lease time.Duration) error {
	lock, err := s.bounded(ctx, stLockSession)
	if err != nil {
		return err
	}
	renew, err := s.bounded(ctx, stRenew)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	var got string
	switch err := tx.StmtContext(ctx, lock).QueryRowContext(ctx, id).Scan(&got); {
	case errors.Is(err, sql.ErrNoRows):
		return nil // closed or deleted: the read reports it
	case err != nil:
		return err
	}
	if _, err := tx.StmtContext(ctx, renew).ExecContext(ctx, sqlcore.Micros(lease), id); err != nil {
		return err
	}
	return tx.Commit()
}

// Acquire takes the lease over (one round trip) or, for a name never
// used, inserts its row. The caller's liveness in those statements may be
// judged with a clock from before a lock wait, so a win is only reported
// after a later statement found the caller still live (one more round
// trip). If it is not, the row names an expired session, which makes the
// lease free for everyone else; its token was used up, which a later
// term's larger token makes harmless.
func (s *dialect) Acquire(ctx context.Context, id, name string) (uint64, bool, bool, error) {
	token, won, live, err := s.take(ctx, runner{s: s}, id, name, 0)
	switch {
	case waited(err):
		return s.lost(ctx, id, name) // the row is held by a transaction that outlasts the call
	case err != nil || !won:
		return 0, false, live, err
	}
	return s.confirm(ctx, id, name, token)
}

// take runs the statements of an acquire with r, its token above above
// too, and reports a win for confirm to check: with the token of a
// take-over, 0 for a row it inserted.
func (s *dialect) take(ctx context.Context, r runner, id, name string, above uint64) (uint64, bool, bool, error) {
	res, err := r.exec(ctx, stTakeOver, id, int64(above), id, name)
	if err != nil {
		return 0, false, false, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, false, false, err
	} else if n > 0 {
		token, err := res.LastInsertId()
		if err != nil {
			return 0, false, false, err
		}
		if token <= 0 {
			return 0, false, false, errors.New("take-over returned no token")
		}
		return uint64(token), true, true, nil
	}
	var live bool
	var token *int64
	if err := r.scanRow(ctx, stAcquireState, []any{&live, &token}, id, name); err != nil {
		return 0, false, false, err
	}
	if !live || token != nil {
		return 0, false, live, nil
	}
	res, err = r.exec(ctx, stInsertLease, name, id, int64(above))
	if err != nil {
		return 0, false, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, false, err == nil, err
	}
	return 0, true, true, nil
}

// runner runs prepared statements: in autocommit, again after a deadlock,
// when tx is nil, else in tx, where a deadlock rolls back the whole
// transaction.
type runner struct {
	s  *dialect
	tx *sql.Tx
}

func (r runner) exec(ctx context.Context, k myStmt, args ...any) (sql.Result, error) {
	if r.tx == nil {
		return r.s.exec(ctx, k, args...)
	}
	st, err := r.s.bounded(ctx, k)
	if err != nil {
		return nil, err
	}
	return r.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

func (r runner) scanRow(ctx context.Context, k myStmt, dest []any, args ...any) error {
	if r.tx == nil {
		return r.s.scanRow(ctx, k, dest, args...)
	}
	st, err := r.s.bounded(ctx, k)
	if err != nil {
		return err
	}
	return r.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...).Scan(dest...)
}

// AcquirePermit runs sqlcore.PermitSteps in a READ COMMITTED transaction,
// again if InnoDB rolled it back to break a deadlock, and then confirms a
// win as Acquire does, once committed. A statement that the server ended
// at its bound (see bound.go) rolls the transaction back: lost, as for
// Acquire. The slot's token used up by a caller found expired is the
// record's too, which only makes the next one larger.
func (s *dialect) AcquirePermit(ctx context.Context, id string, p simba.Permit) (sqlcore.PermitResult, error) {
	name := simba.PermitName(p.Semaphore, p.Slot)
	for i := 1; ; i++ {
		r, err := s.permit(ctx, id, p)
		switch {
		case i < deadlockRetries && deadlock(err) && ctx.Err() == nil:
			continue
		case waited(err):
			_, _, live, err := s.lost(ctx, id, name)
			return sqlcore.PermitResult{Live: live}, err
		case err != nil || !r.Won:
			return r, err
		}
		token, won, live, err := s.confirm(ctx, id, name, r.Token)
		return sqlcore.PermitResult{Token: token, Won: won, Live: live}, err
	}
}

func (s *dialect) permit(ctx context.Context, id string, p simba.Permit) (sqlcore.PermitResult, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return sqlcore.PermitResult{}, err
	}
	defer tx.Rollback() // a no-op after Commit
	r, err := sqlcore.PermitSteps(ctx, permitTx{runner{s, tx}}, id, p)
	if err != nil {
		return r, err
	}
	return r, tx.Commit()
}

// permitTx runs the statements of sqlcore.PermitTx in a transaction.
type permitTx struct{ r runner }

func (t permitTx) LockSemaphore(ctx context.Context, sem string, permits int) (int, uint64, error) {
	if _, err := t.r.exec(ctx, stSemInsert, sem, permits); err != nil {
		return 0, 0, err
	}
	var recorded int
	var token int64
	err := t.r.scanRow(ctx, stSemLock, []any{&recorded, &token}, sem)
	return recorded, uint64(token), err
}

func (t permitTx) Held(ctx context.Context, names []string) (bool, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	owners, err := t.column(ctx, mySlotOwners, args)
	if err != nil || len(owners) == 0 {
		return false, err
	}
	held, err := t.column(ctx, mySlotsHeld, owners)
	return len(held) > 0, err
}

// column runs q, completed with a placeholder per argument, and returns
// its one column.
func (t permitTx) column(ctx context.Context, q string, args []any) ([]any, error) {
	q = t.r.s.boundText(ctx, t.r.s.t.Expand(fmt.Sprintf(q, strings.TrimSuffix(strings.Repeat("?,", len(args)), ","))))
	rows, err := t.r.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []any
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (t permitTx) Take(ctx context.Context, id, name string, above uint64) (uint64, bool, bool, error) {
	token, won, live, err := t.r.s.take(ctx, t.r, id, name, above)
	if err != nil || !won || token != 0 {
		return token, won, live, err
	}
	var cur *int64 // the row inserted, which the transaction reads
	if err := t.r.scanRow(ctx, stAcquireState, []any{&live, &cur}, id, name); err != nil {
		return 0, false, false, err
	}
	if cur == nil || *cur <= 0 {
		return 0, false, false, errors.New("inserted lease row not found")
	}
	return uint64(*cur), true, true, nil
}

func (t permitTx) SetSemaphore(ctx context.Context, sem string, permits int, token uint64) error {
	_, err := t.r.exec(ctx, stSemSet, permits, int64(token), sem)
	return err
}

// lost answers an acquire whose statement the server ended at its bound
// (see bound.go), changing nothing: not won, and whether the caller is
// live.
func (s *dialect) lost(ctx context.Context, id, name string) (uint64, bool, bool, error) {
	live, _, err := s.acquireState(ctx, id, name)
	return 0, false, live, err
}

// confirm reports the win of token (0: the token of the row, which the
// caller inserted) unless the caller is no longer live.
func (s *dialect) confirm(ctx context.Context, id, name string, token uint64) (uint64, bool, bool, error) {
	live, cur, err := s.acquireState(ctx, id, name)
	if err != nil || !live {
		return 0, false, false, err
	}
	if token == 0 {
		if cur == nil || *cur <= 0 {
			return 0, false, false, errors.New("inserted lease row not found")
		}
		token = uint64(*cur)
	}
	return token, true, true, nil
}

// acquireState reads whether session id is live and the token of name's
// row, nil without one.
func (s *dialect) acquireState(ctx context.Context, id, name string) (live bool, token *int64, err error) {
	err = s.scanRow(ctx, stAcquireState, []any{&live, &token}, id, name)
	return live, token, err
}

func (s *dialect) Release(ctx context.Context, id, name string, token uint64) error {
	_, err := s.exec(ctx, stRelease, name, id, int64(token))
	return err
}

func (s *dialect) JoinGroup(ctx context.Context, id, group string) (int, bool, error) {
	if _, err := s.exec(ctx, stJoin, group, id); err != nil {
		return 0, false, err
	}
	var live bool
	var n int64
	if err := s.scanRow(ctx, stGroupState, []any{&live, &n}, id, group); err != nil {
		return 0, false, err
	}
	return int(n), live, nil
}

func (s *dialect) LeaveGroup(ctx context.Context, id, group string) error {
	_, err := s.exec(ctx, stLeave, group, id)
	return err
}

func (s *dialect) CloseSession(ctx context.Context, id string) error {
	_, err := s.exec(ctx, stClose, id)
	return err
}

func (s *dialect) Holder(ctx context.Context, name string) (simba.Holder, bool, error) {
	return sqlcore.ScanHolder(func(dest ...any) error { return s.scanRow(ctx, stHolder, dest, name) }, sql.ErrNoRows)
}

func (s *dialect) ListHolders(ctx context.Context, from, after, below string, scan, limit int) ([]simba.HeldLease, string, int, error) {
	rows, err := s.query(ctx, stListHolders, from, after, below, scan, limit) //nolint:rowserrcheck // ReadHolders checks rows.Err and closes rows
	if err != nil {
		return nil, "", 0, err
	}
	return sqlcore.ReadHolders(sqlcore.SQLRows{Rows: rows})
}

func (s *dialect) Cleanup(ctx context.Context, limit int) (int, error) {
	rows, err := s.query(ctx, stExpired, limit)
	if err != nil {
		return 0, err
	}
	var ids []any
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	if _, err := s.db.ExecContext(ctx, s.boundText(ctx, s.t.Expand(fmt.Sprintf(myDeleteSessions, marks))), ids...); err != nil {
		return 0, err
	}
	return len(ids), nil
}

// Sweep runs one batch in a READ COMMITTED transaction (see mySweepLock),
// again if InnoDB rolled it back to break a deadlock. On MariaDB each of
// its statements is bounded below the call's deadline, as the others are
// (see bound.go): a batch that waits for a row lock past it is rolled
// back, and fails with an error matching context.DeadlineExceeded. Left
// waiting on the server after its client gave up, it would hold the floor,
// and every first acquire of a name would wait behind it, for as long as
// innodb_lock_wait_timeout.
func (s *dialect) Sweep(ctx context.Context, idle time.Duration, after string, limit int) (string, int, error) {
	for i := 1; ; i++ {
		last, n, err := s.sweep(ctx, idle, after, limit)
		if i < deadlockRetries && deadlock(err) && ctx.Err() == nil {
			continue
		}
		if waited(err) {
			err = sqlcore.WaitBoundError(err)
		}
		return last, n, err
	}
}

func (s *dialect) sweep(ctx context.Context, idle time.Duration, after string, limit int) (string, int, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return "", 0, err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, s.boundText(ctx, s.t.Expand(mySweepLock))); err != nil {
		return "", 0, err
	}
	rows, err := tx.QueryContext(ctx, s.boundText(ctx, s.t.Expand(mySweepRead)), sqlcore.Micros(idle), after, limit)
	if err != nil {
		return "", 0, err
	}
	var last string
	var looked int
	var pairs, ids []any
	seen := map[string]bool{}
	var highest int64
	for rows.Next() {
		var name string
		var token int64
		var owner sql.NullString
		var free bool
		if err := rows.Scan(&name, &token, &owner, &free); err != nil {
			rows.Close()
			return "", 0, err
		}
		last, looked = name, looked+1
		if free {
			pairs = append(pairs, name, token)
			highest = max(highest, token)
			if owner.Valid && !seen[owner.String] {
				seen[owner.String] = true
				ids = append(ids, owner.String)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", 0, err
	}
	removed := 0
	if len(pairs) > 0 {
		if len(ids) > 0 {
			owners, err := tx.QueryContext(ctx, s.boundText(ctx, s.t.Expand(fmt.Sprintf(mySweepOwners, strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")))), ids...)
			if err != nil {
				return "", 0, err
			}
			for owners.Next() { // locks taken as the rows are read
			}
			if err := errors.Join(owners.Err(), owners.Close()); err != nil {
				return "", 0, err
			}
		}
		marks := strings.TrimSuffix(strings.Repeat("(?,?),", len(pairs)/2), ",")
		res, err := tx.ExecContext(ctx, s.boundText(ctx, s.t.Expand(fmt.Sprintf(mySweepDelete, marks))), append(pairs, sqlcore.Micros(idle))...)
		if err != nil {
			return "", 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return "", 0, err
		}
		if removed = int(n); removed > 0 {
			if _, err := tx.ExecContext(ctx, s.boundText(ctx, s.t.Expand(mySweepRaise)), highest); err != nil {
				return "", 0, err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return "", 0, err
	}
	if looked < limit {
		last = ""
	}
	return last, removed, nil
}

// Undefined recognises ER_NO_SUCH_TABLE (1146) and ER_BAD_FIELD_ERROR
// (1054).
func (s *dialect) Undefined(err error) (string, bool, bool) {
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1146 && myErr.Number != 1054 {
		return "", false, false
	}
	return myErr.Message, myErr.Number == 1146, true
}

// migrations are the schema's steps, each idempotent; a released step is
// never changed. MySQL 8 has no CREATE INDEX IF NOT EXISTS, so the indexes
// are declared inline, with names short enough for a 41-character prefix
// within MySQL's 64-character identifiers. Names and ids are ascii_bin:
// byte-wise, case-sensitive equality. Times are DATETIME(6) holding UTC,
// written and compared with UTC_TIMESTAMP(6) only, so the session
// time_zone never matters.
var migrations = []sqlcore.Migration{{
	Version: 1,
	Name:    "tables",
	Stmts: []string{`CREATE TABLE IF NOT EXISTS {session} (
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
	},
}, {
	// Added by addSessionColumn. Adding a last column with a default
	// is instant on InnoDB (MySQL 8.0.12+, MariaDB 10.3+). Sessions
	// inserted by an earlier version, which names no identity, get ''.
	Version: 2,
	Name:    "session identity",
	Adds:    []sqlcore.Column{{Table: "{session}", Name: "identity"}},
	Stmts:   addSessionColumn("identity", `VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''''`),
}, {
	// The count of changes to the leases a session owns, which lets a
	// keep-alive skip listing them when its caller already knows them.
	// Added as step 2 adds its column; a session of an earlier version
	// starts at 0, as a new one does.
	Version: 3,
	Name:    "session lease generation",
	Adds:    []sqlcore.Column{{Table: "{session}", Name: "lease_gen"}},
	Stmts:   addSessionColumn("lease_gen", "BIGINT NOT NULL DEFAULT 0"),
}, {
	// The highest token a sweep deleted, in one row: a name without a
	// lease row starts its next term above it.
	Version: 4,
	Name:    "lease floor",
	Creates: []string{"{floor}"},
	Stmts: []string{`CREATE TABLE IF NOT EXISTS {floor} (
    id    TINYINT NOT NULL,
    token BIGINT NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB`,
		`INSERT IGNORE INTO {floor} (id, token) VALUES (1, 0)`,
	},
}, {
	// A record per semaphore, never deleted: the permits it was last
	// granted under and the highest token of its slots, which a slot's
	// next term starts above.
	Version: 5,
	Name:    "semaphores",
	Creates: []string{"{semaphore}"},
	Stmts: []string{`CREATE TABLE IF NOT EXISTS {semaphore} (
    name    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    permits INT NOT NULL,
    token   BIGINT NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB`},
}}

// addSessionColumn returns the statements of a migration step that adds
// column, of type and default ddl (quoted for a string literal), to the
// session table. MySQL 8 has no ADD COLUMN IF NOT EXISTS (MariaDB has), so
// the ALTER TABLE is prepared only when information_schema lacks the
// column, and a no-op (DO 0) otherwise: idempotent on both, in four
// statements on one connection.
func addSessionColumn(column, ddl string) []string {
	return []string{
		`SET @simba_migrate = IF((SELECT COUNT(*) FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = '{session}' AND column_name = '` + column + `') = 0,
    'ALTER TABLE {session} ADD COLUMN ` + column + ` ` + ddl + `',
    'DO 0')`,
		`PREPARE simba_migrate FROM @simba_migrate`,
		`EXECUTE simba_migrate`,
		`DEALLOCATE PREPARE simba_migrate`,
	}
}
