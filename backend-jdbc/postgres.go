package simbasql

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	simba "github.com/simba-go/simba/core"
)

// PostgreSQL statements. Each is one round trip and runs alone (autocommit)
// at READ COMMITTED.
//
// Clocks: now() is the statement's start, the instant its snapshot is
// taken, so it is the right clock for rows read from the snapshot. A row
// read with a lock is its latest version, read after any wait for the
// lock, and must be compared with the time at which it was locked:
// clock_timestamp(), evaluated in a plan node that runs after the lock.
// Not in the WHERE clause of the UPDATE or the SELECT ... FOR UPDATE that
// takes the lock: PostgreSQL evaluates that before it waits, and evaluates
// it again afterwards only when the holder changed the row, not when it
// merely locked it. So the statements below lock the row in a
// MATERIALIZED CTE, which returns it only once locked, and compare its
// expiry with clock_timestamp() where the CTE's rows are used. A locked
// session row cannot be renewed by anyone else until the statement ends,
// so its expiry stays what was read.
const (
	pgOpenSession = `INSERT INTO {session} (id, expires_at) VALUES ($1, now() + $2 * interval '1 microsecond')`

	// cur locks the session row; the UPDATE renews it only if it was live
	// once locked (never revives one). The rest reads, in the same
	// statement, what the session owns and how many live members its
	// groups have; it is empty when the UPDATE matched nothing. Kinds: 0
	// remaining (µs), 1 lease (name, token), 2 group (name, count).
	pgKeepAlive = `WITH cur AS MATERIALIZED (
    SELECT id, expires_at FROM {session} WHERE id = $1 FOR NO KEY UPDATE
), s AS (
    UPDATE {session} AS t SET expires_at = clock_timestamp() + $2 * interval '1 microsecond'
    FROM cur WHERE t.id = cur.id AND cur.expires_at > clock_timestamp()
    RETURNING t.id, t.expires_at
)
SELECT 0, NULL::text, floor(extract(epoch FROM s.expires_at - clock_timestamp()) * 1000000)::bigint FROM s
UNION ALL
SELECT 1, l.name::text, l.token FROM {lease} l JOIN s ON l.session_id = s.id
UNION ALL
SELECT 2, g.group_name::text, (
    SELECT count(*) FROM {member} m JOIN {session} o ON o.id = m.session_id
    WHERE m.group_name = g.group_name AND o.expires_at > now()
) FROM {member} g JOIN s ON g.session_id = s.id`

	// Acquire in one statement.
	//   me:     the caller's session row, locked FOR SHARE: its expiry
	//           cannot move until the statement ends, and is compared with
	//           clock_timestamp() both before inserting and after waiting
	//           for the lease row (ON CONFLICT ... WHERE), so a caller that
	//           expired while waiting never wins.
	//   cur:    the lease's owner as of the statement's snapshot.
	//   holder: that owner's session row, locked FOR SHARE. The lock waits
	//           for a keep-alive of the owner in flight and then reads the
	//           renewed row, and a keep-alive arriving later waits for this
	//           statement and then finds the session expired: the two are
	//           serialised, so an owner is never renewed and taken over at
	//           once.
	//   won:    insert the row (token 1) or, on conflict, take it over
	//           (token + 1) only if the row's current owner is still the one
	//           judged above (or is the caller): a concurrent winner makes
	//           the others lose rather than all win.
	// It returns whether the caller is live and the new token, NULL if lost.
	pgAcquire = `WITH me AS MATERIALIZED (
    SELECT id, expires_at FROM {session} WHERE id = $1 FOR SHARE
), cur AS (
    SELECT session_id FROM {lease} WHERE name = $2
), holder AS MATERIALIZED (
    SELECT o.expires_at FROM {session} o
    WHERE o.id = (SELECT session_id FROM cur) AND o.id <> $1
    FOR SHARE
), won AS (
    INSERT INTO {lease} AS l (name, session_id, token, acquired_at)
    SELECT $2, me.id, 1, now() FROM me
    WHERE me.expires_at > clock_timestamp()
      AND NOT EXISTS (SELECT 1 FROM holder WHERE expires_at > clock_timestamp())
    ON CONFLICT (name) DO UPDATE
        SET session_id = excluded.session_id, token = l.token + 1, acquired_at = excluded.acquired_at
        WHERE (l.session_id IS NOT DISTINCT FROM (SELECT session_id FROM cur)
               OR l.session_id = excluded.session_id)
          AND EXISTS (SELECT 1 FROM me WHERE expires_at > clock_timestamp())
    RETURNING l.token
)
SELECT EXISTS (SELECT 1 FROM me WHERE expires_at > clock_timestamp()), (SELECT token FROM won)`

	pgRelease = `UPDATE {lease} SET session_id = NULL WHERE name = $1 AND session_id = $2 AND token = $3`

	// Snapshot reads only (the insert waits for nothing but a concurrent
	// join of the same session and group), so now() is their clock. The
	// count reads the snapshot from before the insert, so a new membership
	// is added to it.
	pgJoinGroup = `WITH me AS (
    SELECT id FROM {session} WHERE id = $1 AND expires_at > now()
), ins AS (
    INSERT INTO {member} (group_name, session_id) SELECT $2, id FROM me
    ON CONFLICT DO NOTHING RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM me),
    (SELECT count(*) FROM {member} m JOIN {session} o ON o.id = m.session_id
     WHERE m.group_name = $2 AND o.expires_at > now()) + (SELECT count(*) FROM ins)`

	pgLeaveGroup = `DELETE FROM {member} WHERE group_name = $1 AND session_id = $2`

	pgCloseSession = `WITH g AS (DELETE FROM {member} WHERE session_id = $1)
DELETE FROM {session} WHERE id = $1`

	// SKIP LOCKED: rows another node is deleting, or an acquirer is
	// reading, are left for the next round instead of waited for, so no
	// wait makes now() stale (a row changed since the snapshot is checked
	// again, in its new version, against the same now()).
	pgCleanup = `WITH dead AS (
    SELECT id FROM {session} WHERE expires_at < now()
    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
), g AS (
    DELETE FROM {member} WHERE session_id IN (SELECT id FROM dead)
)
DELETE FROM {session} WHERE id IN (SELECT id FROM dead)`
)

type pgStore struct {
	pool *pgxpool.Pool
	t    tables
	q    struct {
		open, keepAlive, acquire, release, join, leave, closeSession, cleanup string
	}
}

func newPGStore(pool *pgxpool.Pool, t tables) *pgStore {
	s := &pgStore{pool: pool, t: t}
	s.q.open = t.expand(pgOpenSession)
	s.q.keepAlive = t.expand(pgKeepAlive)
	s.q.acquire = t.expand(pgAcquire)
	s.q.release = t.expand(pgRelease)
	s.q.join = t.expand(pgJoinGroup)
	s.q.leave = t.expand(pgLeaveGroup)
	s.q.closeSession = t.expand(pgCloseSession)
	s.q.cleanup = t.expand(pgCleanup)
	return s
}

func micros(d time.Duration) int64 { return d.Microseconds() }

func (s *pgStore) missing(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT t FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) WHERE to_regclass(t) IS NULL ORDER BY i`,
		s.t.all())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// migrate runs the DDL in one transaction under an advisory lock, since
// concurrent CREATE TABLE IF NOT EXISTS of one table can fail on
// PostgreSQL.
func (s *pgStore) migrate(ctx context.Context, stmts []string) error {
	h := fnv.New64a()
	h.Write([]byte("simbasql migrate " + s.t.session))
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
			return err
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%.60s...: %w", q, err)
			}
		}
		return nil
	})
}

func (s *pgStore) prepare(context.Context) error { return nil } // pgx caches prepared statements per connection

func (s *pgStore) openSession(ctx context.Context, id string, lease time.Duration) error {
	_, err := s.pool.Exec(ctx, s.q.open, id, micros(lease))
	return err
}

func (s *pgStore) keepAlive(ctx context.Context, id string, lease time.Duration) (simba.KeepAliveReply, bool, error) {
	rows, err := s.pool.Query(ctx, s.q.keepAlive, id, micros(lease))
	if err != nil {
		return simba.KeepAliveReply{}, false, err
	}
	return readKeepAlive(rows)
}

// rowSource is what pgx.Rows and *sql.Rows have in common.
type rowSource interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// sqlRows adapts *sql.Rows, whose Close returns an error, to rowSource.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

// readKeepAlive turns the (kind, name, value) rows of a keep-alive query
// into a reply: kind 0 is the session's remaining time in microseconds
// (absent when the session is not live), 1 a lease and its token, 2 a group
// and its live member count. It closes rows.
func readKeepAlive(rows rowSource) (simba.KeepAliveReply, bool, error) {
	defer rows.Close()
	reply := simba.KeepAliveReply{Leases: map[string]uint64{}, Groups: map[string]int{}}
	live := false
	for rows.Next() {
		var kind int32
		var name sql.NullString
		var val int64
		if err := rows.Scan(&kind, &name, &val); err != nil {
			return simba.KeepAliveReply{}, false, err
		}
		switch {
		case kind == 0:
			reply.Remaining = max(time.Duration(val)*time.Microsecond, 0)
			live = true
		case kind == 1 && name.Valid && val > 0:
			reply.Leases[name.String] = uint64(val)
		case kind == 2 && name.Valid:
			reply.Groups[name.String] = int(val)
		}
	}
	if err := rows.Err(); err != nil {
		return simba.KeepAliveReply{}, false, err
	}
	return reply, live, nil
}

func (s *pgStore) acquire(ctx context.Context, id, name string) (uint64, bool, bool, error) {
	var live bool
	var token *int64
	if err := s.pool.QueryRow(ctx, s.q.acquire, id, name).Scan(&live, &token); err != nil {
		return 0, false, false, err
	}
	if token == nil || *token <= 0 {
		return 0, false, live, nil
	}
	return uint64(*token), true, live, nil
}

func (s *pgStore) release(ctx context.Context, id, name string, token uint64) error {
	_, err := s.pool.Exec(ctx, s.q.release, name, id, int64(token))
	return err
}

func (s *pgStore) joinGroup(ctx context.Context, id, group string) (int, bool, error) {
	var live bool
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.join, id, group).Scan(&live, &n); err != nil {
		return 0, false, err
	}
	return int(n), live, nil
}

func (s *pgStore) leaveGroup(ctx context.Context, id, group string) error {
	_, err := s.pool.Exec(ctx, s.q.leave, group, id)
	return err
}

func (s *pgStore) closeSession(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, s.q.closeSession, id)
	return err
}

func (s *pgStore) cleanup(ctx context.Context, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, s.q.cleanup, limit)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

func (s *pgStore) close() {}
