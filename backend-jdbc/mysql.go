package simbasql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// MySQL / MariaDB statements. Each runs alone in autocommit mode. Times are
// UTC DATETIME(6) values compared with UTC_TIMESTAMP(6), which is evaluated
// once per statement on the database clock. Where ownership is decided
// (UPDATE ... JOIN, INSERT ... SELECT) InnoDB reads the joined rows with
// shared locks, that is their latest committed version, never a stale
// REPEATABLE READ snapshot.
const (
	myOpenSession = `INSERT INTO {session} (id, expires_at, created_at)
VALUES (?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6))`

	myRenew = `UPDATE {session} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)`

	// Read after myRenew: kinds as on PostgreSQL (0 remaining µs, 1 lease,
	// 2 group count). No kind-0 row means the session is not live.
	myKeepAliveRead = `SELECT 0, CAST(NULL AS CHAR(128) CHARACTER SET ascii),
    TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {session} WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)
UNION ALL
SELECT 1, name, token FROM {lease} WHERE session_id = ?
UNION ALL
SELECT 2, g.group_name, (
    SELECT COUNT(*) FROM {member} m JOIN {session} o ON o.id = m.session_id
    WHERE m.group_name = g.group_name AND o.expires_at > UTC_TIMESTAMP(6)
) FROM {member} g WHERE g.session_id = ?`

	// Take over an existing row in one statement: the caller must be live
	// and the current owner absent, expired or the caller itself. The lease
	// row is locked exclusively and both session rows in share mode, so a
	// keep-alive of the owner in flight is waited for and one arriving
	// later waits and then finds the session expired. LAST_INSERT_ID(expr)
	// hands the new token back in the OK packet: no second read.
	myTakeOver = `UPDATE {lease} l
JOIN {session} me ON me.id = ? AND me.expires_at > UTC_TIMESTAMP(6)
LEFT JOIN {session} o ON o.id = l.session_id AND o.id <> me.id AND o.expires_at > UTC_TIMESTAMP(6)
SET l.token = LAST_INSERT_ID(l.token + 1), l.session_id = me.id, l.acquired_at = UTC_TIMESTAMP(6)
WHERE l.name = ? AND o.id IS NULL`

	// Why myTakeOver changed nothing: caller not live, or row held.
	myAcquireState = `SELECT
    EXISTS (SELECT 1 FROM {session} WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)),
    EXISTS (SELECT 1 FROM {lease} WHERE name = ?)`

	// First term of a name never seen: a concurrent first insert wins and
	// this one is ignored (0 rows).
	myInsertLease = `INSERT IGNORE INTO {lease} (name, session_id, token, acquired_at)
SELECT ?, id, 1, UTC_TIMESTAMP(6) FROM {session} WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)`

	myRelease = `UPDATE {lease} SET session_id = NULL WHERE name = ? AND session_id = ? AND token = ?`

	myJoinGroup = `INSERT IGNORE INTO {member} (group_name, session_id, joined_at)
SELECT ?, id, UTC_TIMESTAMP(6) FROM {session} WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)`

	myGroupState = `SELECT
    EXISTS (SELECT 1 FROM {session} WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)),
    (SELECT COUNT(*) FROM {member} m JOIN {session} o ON o.id = m.session_id
     WHERE m.group_name = ? AND o.expires_at > UTC_TIMESTAMP(6))`

	myLeaveGroup = `DELETE FROM {member} WHERE group_name = ? AND session_id = ?`

	// A multi-table DELETE removes the session and its memberships
	// atomically.
	myCloseSession = `DELETE s, g FROM {session} s LEFT JOIN {member} g ON g.session_id = s.id WHERE s.id = ?`

	myExpired = `SELECT id FROM {session} WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT ?`

	// Completed with one placeholder per id; expiry is checked again.
	myDeleteSessions = `DELETE s, g FROM {session} s LEFT JOIN {member} g ON g.session_id = s.id
WHERE s.expires_at < UTC_TIMESTAMP(6) AND s.id IN (%s)`
)

// myStmt names the prepared statements of mysqlStore.
type myStmt int

const (
	stOpen myStmt = iota
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
	stExpired
	stCount
)

var myStatements = [stCount]string{
	stOpen:          myOpenSession,
	stRenew:         myRenew,
	stKeepAliveRead: myKeepAliveRead,
	stTakeOver:      myTakeOver,
	stAcquireState:  myAcquireState,
	stInsertLease:   myInsertLease,
	stRelease:       myRelease,
	stJoin:          myJoinGroup,
	stGroupState:    myGroupState,
	stLeave:         myLeaveGroup,
	stClose:         myCloseSession,
	stExpired:       myExpired,
}

// mysqlStore runs prepared statements: without them database/sql would
// prepare, execute and close every parameterised statement (two round
// trips). A *sql.Stmt is prepared again transparently on each new
// connection.
type mysqlStore struct {
	db *sql.DB
	t  tables

	mu    sync.Mutex
	stmts []*sql.Stmt // nil until prepare succeeded
}

func newMySQLStore(db *sql.DB, t tables) *mysqlStore { return &mysqlStore{db: db, t: t} }

var errNotPrepared = errors.New("statements not prepared")

func (s *mysqlStore) stmt(k myStmt) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stmts == nil {
		return nil, errNotPrepared
	}
	return s.stmts[k], nil
}

func (s *mysqlStore) exec(ctx context.Context, k myStmt, args ...any) (sql.Result, error) {
	st, err := s.stmt(k)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (s *mysqlStore) query(ctx context.Context, k myStmt, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(k)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// scanRow runs statement k and scans its single row into dest.
func (s *mysqlStore) scanRow(ctx context.Context, k myStmt, dest []any, args ...any) error {
	st, err := s.stmt(k)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

func (s *mysqlStore) missing(ctx context.Context) ([]string, error) {
	var out []string
	for _, t := range s.t.all() {
		var n int
		err := s.db.QueryRowContext(ctx,
			`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, t).Scan(&n)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *mysqlStore) migrate(ctx context.Context, stmts []string) error {
	for _, q := range stmts {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%.60s...: %w", q, err)
		}
	}
	return nil
}

func (s *mysqlStore) prepare(ctx context.Context) error {
	stmts := make([]*sql.Stmt, stCount)
	for k, q := range myStatements {
		st, err := s.db.PrepareContext(ctx, s.t.expand(q))
		if err != nil {
			for _, p := range stmts[:k] {
				p.Close()
			}
			return err
		}
		stmts[k] = st
	}
	s.mu.Lock()
	old := s.stmts
	s.stmts = stmts
	s.mu.Unlock()
	for _, p := range old {
		p.Close()
	}
	return nil
}

// close closes the statements; a call still running with one fails with
// an error, never a panic.
func (s *mysqlStore) close() {
	s.mu.Lock()
	old := s.stmts
	s.mu.Unlock()
	for _, p := range old {
		p.Close()
	}
}

func (s *mysqlStore) openSession(ctx context.Context, id string, lease time.Duration) error {
	_, err := s.exec(ctx, stOpen, id, micros(lease))
	return err
}

// keepAlive renews (one round trip) and then reads the reply (a second).
// The renewal's row count is not trusted (clientFoundRows changes it, and
// an unchanged value counts as zero): the read says whether the session is
// live, and an expired session can no longer be renewed in between.
func (s *mysqlStore) keepAlive(ctx context.Context, id string, lease time.Duration) (simba.KeepAliveReply, bool, error) {
	if _, err := s.exec(ctx, stRenew, micros(lease), id); err != nil {
		return simba.KeepAliveReply{}, false, err
	}
	rows, err := s.query(ctx, stKeepAliveRead, id, id, id) //nolint:rowserrcheck // readKeepAlive checks rows.Err and closes rows
	if err != nil {
		return simba.KeepAliveReply{}, false, err
	}
	return readKeepAlive(sqlRows{rows})
}

func (s *mysqlStore) acquire(ctx context.Context, id, name string) (uint64, bool, bool, error) {
	res, err := s.exec(ctx, stTakeOver, id, name)
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
	var live, exists bool
	if err := s.scanRow(ctx, stAcquireState, []any{&live, &exists}, id, name); err != nil {
		return 0, false, false, err
	}
	if !live || exists {
		return 0, false, live, nil
	}
	res, err = s.exec(ctx, stInsertLease, name, id)
	if err != nil {
		return 0, false, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, false, err
	}
	return 1, n == 1, true, nil
}

func (s *mysqlStore) release(ctx context.Context, id, name string, token uint64) error {
	_, err := s.exec(ctx, stRelease, name, id, int64(token))
	return err
}

func (s *mysqlStore) joinGroup(ctx context.Context, id, group string) (int, bool, error) {
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

func (s *mysqlStore) leaveGroup(ctx context.Context, id, group string) error {
	_, err := s.exec(ctx, stLeave, group, id)
	return err
}

func (s *mysqlStore) closeSession(ctx context.Context, id string) error {
	_, err := s.exec(ctx, stClose, id)
	return err
}

func (s *mysqlStore) cleanup(ctx context.Context, limit int) (int, error) {
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
	if _, err := s.db.ExecContext(ctx, s.t.expand(fmt.Sprintf(myDeleteSessions, marks)), ids...); err != nil {
		return 0, err
	}
	return len(ids), nil
}
