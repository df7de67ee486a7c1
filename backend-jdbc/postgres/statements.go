package simbapg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

// releaseChannel is the channel of the release broadcast (a template, see
// sqlcore.Tables.Expand): the statements notify it, the listener LISTENs
// on it. The channel is the template in lower case (lower() in the
// statements, strings.ToLower for the listener): the table names are
// unquoted, so PostgreSQL folds them to lower case, and backends whose
// prefixes differ in case alone share the tables and must share the
// channel too.
const releaseChannel = "{p}release"

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
	pgOpenSession = `INSERT INTO {session} (id, expires_at, identity) VALUES ($1, now() + $2 * interval '1 microsecond', $3)`

	// cur locks the session row; the UPDATE renews it only if it was live
	// once locked (never revives one). The rest reads, in the same
	// statement, how many live members the session's groups have and, for
	// each lease name of $3 (NULL past the ones used), the session's token
	// of it, 0 when the row does not name the session: one row per name,
	// looked up by name one at a time (an aggregate in LATERAL, which the
	// planner cannot turn into a join reading every lease of the session).
	// The session is compared in the aggregate's FILTER, not in WHERE, so
	// that the primary key is the one index the look-up can use: with the
	// session in WHERE, on a table without statistics yet, the planner
	// walked the session_id index instead, every lease of the session for
	// each name (504 rows read at 100 leases held, against 9 at 2,000).
	// It is empty when the UPDATE matched nothing. Kinds: 0 remaining
	// (µs), 1 a lease name and the session's token, 2 group (name, count).
	pgKeepAlive = `WITH cur AS MATERIALIZED (
    SELECT id, expires_at FROM {session} WHERE id = $1 FOR NO KEY UPDATE
), s AS (
    UPDATE {session} AS t SET expires_at = clock_timestamp() + $2 * interval '1 microsecond'
    FROM cur WHERE t.id = cur.id AND cur.expires_at > clock_timestamp()
    RETURNING t.id, t.expires_at
)
SELECT 0, NULL::text, floor(extract(epoch FROM s.expires_at - clock_timestamp()) * 1000000)::bigint FROM s
UNION ALL
SELECT 1, c.name, x.token FROM s, unnest($3::text[]) AS c(name),
    LATERAL (SELECT coalesce(max(l.token) FILTER (WHERE l.session_id = s.id), 0) AS token FROM {lease} l WHERE l.name = c.name) AS x
WHERE c.name IS NOT NULL
UNION ALL
SELECT 2, g.group_name::text, (
    SELECT count(*) FROM {member} m JOIN {session} o ON o.id = m.session_id
    WHERE m.group_name = g.group_name AND o.expires_at > now()
) FROM {member} g JOIN s ON g.session_id = s.id`

	// Acquire in one statement.
	//   me:     the caller's session row as of the snapshot, not locked:
	//           the statement may wait for the lease row (a user's
	//           transaction holding it), and a lock on the caller's row
	//           held meanwhile would make the caller's keep-alive wait
	//           behind it. Its expiry is compared with clock_timestamp()
	//           both before inserting and after waiting for the lease row
	//           (ON CONFLICT ... WHERE), so a caller that expired while
	//           waiting never wins: a keep-alive renewing it meanwhile
	//           only moves the real expiry later than the one read, which
	//           can only refuse a win, and an expired session is never
	//           renewed. The caller is reported live if it was when the
	//           statement began (now()): a session renewed during a wait
	//           is not reported expired because its old expiry passed.
	//   cur:    the lease's owner and token as of the statement's snapshot.
	//   holder: that owner's session row, locked FOR SHARE. The lock waits
	//           for a keep-alive of the owner in flight and then reads the
	//           renewed row, and a keep-alive arriving later waits for this
	//           statement and then finds the session expired: the two are
	//           serialised, so an owner is never renewed and taken over at
	//           once.
	//   won:    insert the row or, on conflict, take it over (token + 1)
	//           only if the row's current owner is still the one judged
	//           above, or is the caller, or is nobody (a release committed
	//           while this statement waited for the row: the name is free
	//           to anyone): a concurrent winner makes the others lose
	//           rather than all win. An inserted row's token is
	//           one above the floor, read with a share lock when the row is
	//           made (after the waits for me and holder): a locking read
	//           returns the floor's latest version, not the snapshot's, so
	//           a row inserted, taken over and swept while this statement
	//           waited (its tokens all below the raised floor) is never
	//           given a token again. A sweep locks the floor before it
	//           deletes anything, so the insert waits for a sweep under
	//           way and a sweep for the inserts that read the floor.
	//           acquired_at, the start of the term, is clock_timestamp()
	//           where the row is written (after every lock wait; for a
	//           take-over, after the lease row is locked), not now(): after
	//           a wait the statement's start can lie more than a sweep's
	//           idle in the past, and a term stamped with it looked idle to
	//           a sweep begun meanwhile, which deleted the row just won.
	//           The new token is also above $3, the token of the
	//           semaphore's record for a permit's slot (0 otherwise).
	//           A new owner clears the watched flag (see pgWatch): the
	//           waiters that lost to it mark the row again.
	// It returns whether the caller is live and the new token, NULL if lost.
	pgAcquire = `WITH me AS MATERIALIZED (
    SELECT id, expires_at FROM {session} WHERE id = $1
), cur AS (
    SELECT session_id, token FROM {lease} WHERE name = $2
), holder AS MATERIALIZED (
    SELECT o.expires_at FROM {session} o
    WHERE o.id = (SELECT session_id FROM cur) AND o.id <> $1
    FOR SHARE
), won AS (
    INSERT INTO {lease} AS l (name, session_id, token, acquired_at)
    SELECT $2, me.id, GREATEST((SELECT token FROM {floor} WHERE id = 1 FOR SHARE), (SELECT token FROM cur), $3::bigint, 0) + 1, clock_timestamp() FROM me
    WHERE me.expires_at > clock_timestamp()
      AND NOT EXISTS (SELECT 1 FROM holder WHERE expires_at > clock_timestamp())
    ON CONFLICT (name) DO UPDATE
        SET session_id = excluded.session_id, token = GREATEST(l.token, $3::bigint) + 1, acquired_at = clock_timestamp(),
            watched = l.watched AND l.session_id IS NOT DISTINCT FROM excluded.session_id
        WHERE (l.session_id IS NOT DISTINCT FROM (SELECT session_id FROM cur)
               OR l.session_id = excluded.session_id OR l.session_id IS NULL)
          AND EXISTS (SELECT 1 FROM me WHERE expires_at > clock_timestamp())
    RETURNING l.token
)
SELECT EXISTS (SELECT 1 FROM me WHERE expires_at > now()), (SELECT token FROM won)`

	// A permit acquire's statements, in one READ COMMITTED transaction
	// (sqlcore.PermitSteps) with pgAcquire. pgLockSemaphore inserts the
	// semaphore's record or, when it exists, locks it with a no-op update,
	// which waits for the transaction holding it and returns its latest
	// version. pgSlotsHeld, a statement begun after that lock, locks the
	// sessions owning the slots $1 FOR SHARE, as a take-over locks the
	// holder (a keep-alive in flight is waited for and its renewal read),
	// and compares their expiry with clock_timestamp() once locked.
	pgLockSemaphore = `INSERT INTO {semaphore} AS m (name, permits, token) VALUES ($1, $2, 0)
ON CONFLICT (name) DO UPDATE SET permits = m.permits RETURNING m.permits, m.token`

	pgSlotsHeld = `WITH own AS MATERIALIZED (
    SELECT s.expires_at FROM {session} s
    WHERE s.id IN (SELECT l.session_id FROM {lease} l WHERE l.name = ANY($1::text[]))
    FOR SHARE
)
SELECT EXISTS (SELECT 1 FROM own WHERE expires_at > clock_timestamp())`

	pgSetSemaphore = `UPDATE {semaphore} SET permits = $2, token = $3 WHERE name = $1`

	// Frees the lease if the session owns it with the token. It locks the
	// lease row alone. When a waiter marked the row watched (pgWatch), the
	// release is broadcast on the channel {p}release, the name as payload,
	// which PostgreSQL delivers to the listening connections when the
	// release commits; an unwatched release sends nothing, so it does not
	// take the lock that serialises the commits of notifying transactions.
	pgRelease = `WITH r AS (
    UPDATE {lease} SET session_id = NULL WHERE name = $1 AND session_id = $2 AND token = $3 RETURNING watched
)
SELECT pg_notify(lower('` + releaseChannel + `'), $1) FROM r WHERE r.watched`

	// Marks the lease row watched, so that its next release is broadcast,
	// and reports whether a live session owns it. The UPDATE locks the row
	// and works on its latest version, after any release in flight: a
	// release that commits after it sees the mark and notifies; one that
	// committed before leaves no owner, and no row is returned. No row, or
	// an owner that is not live: the lease may be free now.
	pgWatch = `UPDATE {lease} AS l SET watched = true WHERE name = $1 AND session_id IS NOT NULL
RETURNING EXISTS (SELECT 1 FROM {session} s WHERE s.id = l.session_id AND s.expires_at > clock_timestamp())`

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

	// Deleting the session row frees its leases, and the lease rows are
	// released as pgRelease does, the watched ones broadcast. The UPDATE
	// locks each row and reads its latest version: a pgWatch that marked
	// a row after this statement's snapshot, having seen the session
	// still live, commits first, and its mark is read here; one that
	// comes later waits for this statement and finds the row free. A read
	// of the rows from the snapshot would miss the first.
	pgCloseSession = `WITH g AS (DELETE FROM {member} WHERE session_id = $1),
d AS (DELETE FROM {session} WHERE id = $1 RETURNING id),
r AS (UPDATE {lease} SET session_id = NULL WHERE session_id IN (SELECT id FROM d) RETURNING name, watched)
SELECT pg_notify(lower('` + releaseChannel + `'), r.name) FROM r WHERE r.watched`

	// The owner of a lease if its session is live. A snapshot read, which
	// locks and waits for nothing, so now() is its clock, as for the group
	// counts of the keep-alive. No row: no owner (released), or an owner
	// expired, closed or cleaned up. The start of the term is sent as
	// microseconds since the epoch (sqlcore.ScanHolder).
	pgHolder = `SELECT s.id, s.identity, l.token, (extract(epoch FROM l.acquired_at) * 1000000)::bigint
FROM {lease} l JOIN {session} s ON s.id = l.session_id
WHERE l.name = $1 AND s.expires_at > now()`

	// One page of a listing: b reads the next $4 lease rows of the name
	// range [$1, $3) above $2 from the primary key's index, h keeps those
	// a live session owns (the snapshot's now(), as in pgHolder), at most
	// $5, with the start of each term in microseconds since the epoch (as
	// on MySQL, for sqlcore.ReadHolders), and a last row of its own (its
	// session NULL) gives the last name b read and how many rows it read.
	pgListHolders = `WITH b AS MATERIALIZED (
    SELECT name, session_id, token, acquired_at FROM {lease}
    WHERE name >= $1 AND name > $2 AND name < $3 ORDER BY name LIMIT $4
), h AS (
    SELECT b.name, s.id, s.identity, b.token, b.acquired_at
    FROM b JOIN {session} s ON s.id = b.session_id
    WHERE s.expires_at > now() ORDER BY b.name LIMIT $5
)
SELECT name::text, id::text, identity::text, token, (extract(epoch FROM acquired_at) * 1000000)::bigint FROM h
UNION ALL
SELECT max(name)::text, NULL, NULL, count(*), NULL FROM b`

	// Sweep: fl locks the floor first (see the acquire's won); b is the
	// batch, the next $2 lease rows in name order after $1, with their
	// tokens (none when the floor row is missing, so nothing is deleted
	// without it); own locks the sessions owning the batch's rows FOR
	// SHARE, as a take-over locks the holder: the lock waits for a
	// keep-alive in flight and returns the row's latest version, so an
	// owner renewed meanwhile is seen live (a plain read would show the
	// expiry before the renewal and free a lease its renewed owner still
	// holds); d deletes those that no live session owns and whose term
	// began $3 µs or more ago, and f raises the floor to the highest token
	// d deleted, in the same statement and transaction.
	//
	// b and own are read from the statement's snapshot. A row changed
	// after it (a take-over or a release committed while the sweep waited
	// for the floor or for the row) is checked again by the DELETE in its
	// new version (READ COMMITTED's recheck of an updated row), but
	// against own as built from the old one, which lacks a new owner. So
	// d deletes a row only at the token b read: a take-over raises the
	// token, so a row won since the snapshot is kept whoever won it, and a
	// release, which keeps the token and only frees the row, leaves it
	// deletable. The term's start is checked again too; now(), the
	// statement's start, is only earlier than the time of a check after a
	// lock wait, which keeps more. It returns the last name of the batch,
	// how many rows it holds and how many were deleted.
	pgSweep = `WITH fl AS MATERIALIZED (
    SELECT token FROM {floor} WHERE id = 1 FOR UPDATE
), b AS MATERIALIZED (
    SELECT l.name, l.token FROM {lease} l, fl WHERE l.name > $1 ORDER BY l.name LIMIT $2
), own AS MATERIALIZED (
    SELECT s.id, s.expires_at FROM {session} s
    WHERE s.id IN (SELECT l.session_id FROM {lease} l JOIN b ON b.name = l.name
                   WHERE l.acquired_at <= now() - $3 * interval '1 microsecond')
    FOR SHARE
), d AS (
    DELETE FROM {lease} l USING b
    WHERE l.name = b.name AND l.token = b.token AND l.acquired_at <= now() - $3 * interval '1 microsecond'
      AND NOT EXISTS (SELECT 1 FROM own WHERE own.id = l.session_id AND own.expires_at > clock_timestamp())
    RETURNING l.token
), f AS (
    UPDATE {floor} SET token = GREATEST(token, (SELECT max(token) FROM d))
    WHERE id = 1 AND EXISTS (SELECT 1 FROM d)
)
SELECT (SELECT max(name) FROM b)::text, (SELECT count(*) FROM b), (SELECT count(*) FROM d)`

	// Tables that do not exist ($1), and columns ($2 table, $3 column)
	// missing from tables that do. to_regclass folds an unquoted name to
	// lower case, as CREATE TABLE did.
	pgMissing = `SELECT 0 AS k, u.i, u.t, NULL::text
FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) WHERE to_regclass(u.t) IS NULL
UNION ALL
SELECT 1, c.i, c.t, c.c
FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS c(t, c, i)
WHERE to_regclass(c.t) IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM pg_attribute a
    WHERE a.attrelid = to_regclass(c.t) AND a.attname = c.c AND a.attnum > 0 AND NOT a.attisdropped)
ORDER BY 1, 2`

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

// migrations are the schema's steps, each idempotent; a released step is
// never changed. Index names are short so that a 41-character prefix stays
// within PostgreSQL's 63-byte identifiers.
var migrations = []sqlcore.Migration{{
	Version: 1,
	Name:    "tables",
	Stmts: []string{`CREATE TABLE IF NOT EXISTS {session} (
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
	},
}, {
	// ADD COLUMN with a constant default only changes the catalog
	// (PostgreSQL 11+): the rows are not rewritten. Sessions inserted by an
	// earlier version, which names no identity, get ''.
	Version: 2,
	Name:    "session identity",
	Adds:    []sqlcore.Column{{Table: "{session}", Name: "identity"}},
	Stmts: []string{
		`ALTER TABLE {session} ADD COLUMN IF NOT EXISTS identity varchar(256) NOT NULL DEFAULT ''`,
	},
}, {
	// The count of changes to the leases a session owns, which lets a
	// keep-alive skip listing them when its caller already knows them.
	// Catalog-only, as above. A session of an earlier version starts at
	// 0, as a new one does.
	Version: 3,
	Name:    "session lease generation",
	Adds:    []sqlcore.Column{{Table: "{session}", Name: "lease_gen"}},
	Stmts: []string{
		`ALTER TABLE {session} ADD COLUMN IF NOT EXISTS lease_gen bigint NOT NULL DEFAULT 0`,
	},
}, {
	// The highest token a sweep deleted, in one row: a name without a
	// lease row starts its next term above it.
	Version: 4,
	Name:    "lease floor",
	Creates: []string{"{floor}"},
	Stmts: []string{`CREATE TABLE IF NOT EXISTS {floor} (
    id    smallint PRIMARY KEY CHECK (id = 1),
    token bigint NOT NULL CHECK (token >= 0)
)`,
		`INSERT INTO {floor} (id, token) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`,
	},
}, {
	// A record per semaphore, never deleted: the permits it was last
	// granted under and the highest token of its slots, which a slot's
	// next term starts above.
	Version: 5,
	Name:    "semaphores",
	Creates: []string{"{semaphore}"},
	Stmts: []string{`CREATE TABLE IF NOT EXISTS {semaphore} (
    name    varchar(128) COLLATE "C" PRIMARY KEY,
    permits integer NOT NULL CHECK (permits > 0),
    token   bigint NOT NULL CHECK (token >= 0)
)`},
}, {
	// Set by a waiter that listens for the lease's release, cleared by
	// the next owner: a release broadcasts itself only when it is set.
	// Catalog-only, as step 2.
	Version: 6,
	Name:    "lease watch",
	Adds:    []sqlcore.Column{{Table: "{lease}", Name: "watched"}},
	Stmts: []string{
		`ALTER TABLE {lease} ADD COLUMN IF NOT EXISTS watched boolean NOT NULL DEFAULT false`,
	},
}}

// dialect runs the statements above on a pgx pool.
type dialect struct {
	pool *pgxpool.Pool
	t    sqlcore.Tables
	l    *listener
	q    struct {
		open, keepAlive, acquire, release, join, leave, closeSession, holder, list, cleanup, sweep string
		lockSem, slotsHeld, setSem, watch                                                          string
	}
}

func newDialect(pool *pgxpool.Pool, t sqlcore.Tables) *dialect {
	s := &dialect{pool: pool, t: t, l: newListener(pool, strings.ToLower(t.Expand(releaseChannel)))}
	s.q.open = t.Expand(pgOpenSession)
	s.q.keepAlive = t.Expand(pgKeepAlive)
	s.q.acquire = t.Expand(pgAcquire)
	s.q.release = t.Expand(pgRelease)
	s.q.join = t.Expand(pgJoinGroup)
	s.q.leave = t.Expand(pgLeaveGroup)
	s.q.closeSession = t.Expand(pgCloseSession)
	s.q.holder = t.Expand(pgHolder)
	s.q.list = t.Expand(pgListHolders)
	s.q.cleanup = t.Expand(pgCleanup)
	s.q.sweep = t.Expand(pgSweep)
	s.q.lockSem = t.Expand(pgLockSemaphore)
	s.q.slotsHeld = t.Expand(pgSlotsHeld)
	s.q.setSem = t.Expand(pgSetSemaphore)
	s.q.watch = t.Expand(pgWatch)
	return s
}

func (s *dialect) Missing(ctx context.Context, cols []sqlcore.Column) ([]string, []sqlcore.Column, error) {
	tables, names := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		tables[i], names[i] = c.Table, c.Name
	}
	rows, err := s.pool.Query(ctx, pgMissing, s.t.All(), tables, names)
	if err != nil {
		return nil, nil, err
	}
	var missing []string
	var lacking []sqlcore.Column
	var kind int32
	var i int64
	var table string
	var column *string
	_, err = pgx.ForEachRow(rows, []any{&kind, &i, &table, &column}, func() error {
		if kind == 0 {
			missing = append(missing, table)
		} else if column != nil {
			lacking = append(lacking, sqlcore.Column{Table: table, Name: *column})
		}
		return nil
	})
	return missing, lacking, err
}

// Migrate runs the DDL in one transaction under an advisory lock, since
// concurrent CREATE TABLE IF NOT EXISTS of one table can fail on
// PostgreSQL.
func (s *dialect) Migrate(ctx context.Context, stmts []string) error {
	h := fnv.New64a()
	h.Write([]byte("simba migrate " + s.t.Session))
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

func (s *dialect) Prepare(context.Context) error { return nil } // pgx caches prepared statements per connection

func (s *dialect) OpenSession(ctx context.Context, id string, lease time.Duration, identity string) error {
	_, err := s.pool.Exec(ctx, s.q.open, id, sqlcore.Micros(lease), identity)
	return err
}

// deadlockRetries bounds the runs of a statement that PostgreSQL aborted
// to break a deadlock; serializationRetries those of a statement it
// aborted with a serialization failure, where ctx has no deadline (with
// one, the deadline bounds them).
const (
	deadlockRetries      = 3
	serializationRetries = 100
)

// Pauses before a statement aborted with a serialization failure runs
// again: from serializationPause, doubling up to serializationPauseMax,
// each a random time between half of it and all of it.
const (
	serializationPause    = time.Millisecond
	serializationPauseMax = 50 * time.Millisecond
)

// retry runs f, again if PostgreSQL aborted it to break a deadlock
// (deadlock_detected, 40P01) or with a serialization failure
// (serialization_failure, 40001): it was rolled back, so running it again
// is safe. The statements lock rows in an order meant to rule deadlocks
// out; this covers a cycle that order misses, at the cost of
// deadlock_timeout. The statements are written for READ COMMITTED, at
// which a row locked or updated after the statement's snapshot is checked
// again in its latest version; at REPEATABLE READ or SERIALIZABLE, a
// default_transaction_isolation that a user may set, PostgreSQL aborts
// such a statement with a serialization failure instead, and the run
// again, in a transaction of its own with a new snapshot, is the check in
// the latest version. A statement aborted that way runs again while ctx
// lasts, after a short random pause: at SERIALIZABLE a statement reading
// rows that concurrent calls keep writing (a keep-alive reading the leases
// of a session whose acquires and releases run meanwhile) can be aborted
// many times in a row, and 20 immediate tries failed a keep-alive that
// still had most of its time.
func retry(ctx context.Context, f func() error) error {
	pause := serializationPause
	for i := 1; ; i++ {
		err := f()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || ctx.Err() != nil {
			return err
		}
		switch {
		case pgErr.Code == "40P01" && i < deadlockRetries:
		case pgErr.Code == "40001" && i < serializationRetries:
			wait := pause/2 + rand.N(pause/2+1)
			pause = min(2*pause, serializationPauseMax)
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < 2*wait {
				return err // no time left for the pause and another run
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return err
			case <-timer.C:
			}
		default:
			return err
		}
	}
}

func (s *dialect) KeepAlive(ctx context.Context, id string, lease time.Duration, names []string) (simba.KeepAliveReply, map[string]uint64, bool, error) {
	// At least MinLeaseChecks names, NULL past the ones used: with fewer,
	// PostgreSQL estimates the look-ups cheaper than its generic plan and
	// plans the statement again on every call, which costs more than
	// running it (450 against 150 µs here).
	arg := make([]*string, max(len(names), simba.MinLeaseChecks))
	for i := range names {
		arg[i] = &names[i]
	}
	var reply simba.KeepAliveReply
	var tokens map[string]uint64
	var live bool
	err := retry(ctx, func() error {
		rows, err := s.boundedQuery(ctx, s.q.keepAlive, id, sqlcore.Micros(lease), arg)
		if err != nil {
			return err
		}
		reply, tokens, live, err = sqlcore.ReadKeepAlive(rows, len(names))
		return err
	})
	return reply, tokens, live, err
}

func (s *dialect) Acquire(ctx context.Context, id, name string) (uint64, bool, bool, error) {
	var live bool
	var token *int64
	switch err := retry(ctx, func() error {
		return s.boundedRow(ctx, s.q.acquire, []any{id, name, int64(0)}, &live, &token)
	}); {
	case lockTimedOut(err):
		// Rolled back at its bound (see bound.go), a row lock held past
		// it: lost, and the caller not known to be expired.
		return 0, false, true, nil
	case err != nil:
		return 0, false, false, err
	}
	return won(live, token)
}

// won reads the answer of pgAcquire.
func won(live bool, token *int64) (uint64, bool, bool, error) {
	if token == nil || *token <= 0 {
		return 0, false, live, nil
	}
	return uint64(*token), true, live, nil
}

// AcquirePermit runs sqlcore.PermitSteps in a READ COMMITTED transaction
// under the lock_timeout of ctx (see bound.go), again after a deadlock or
// a serialization failure, as retry does for one statement. A lock wait
// that reaches the bound rolls the transaction back: lost, as for Acquire.
func (s *dialect) AcquirePermit(ctx context.Context, id string, p simba.Permit) (sqlcore.PermitResult, error) {
	var r sqlcore.PermitResult
	err := retry(ctx, func() error {
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			if bound, ok := lockTimeout(ctx); ok {
				if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, bound); err != nil {
					return err
				}
			}
			var err error
			r, err = sqlcore.PermitSteps(ctx, permitTx{s, tx}, id, p)
			return err
		})
	})
	if lockTimedOut(err) {
		return sqlcore.PermitResult{Live: true}, nil
	}
	return r, err
}

// permitTx runs the statements of sqlcore.PermitTx in tx.
type permitTx struct {
	s  *dialect
	tx pgx.Tx
}

func (t permitTx) LockSemaphore(ctx context.Context, sem string, permits int) (int, uint64, error) {
	var recorded int32
	var token int64
	err := t.tx.QueryRow(ctx, t.s.q.lockSem, sem, permits).Scan(&recorded, &token)
	return int(recorded), uint64(token), err
}

func (t permitTx) Held(ctx context.Context, names []string) (bool, error) {
	var held bool
	err := t.tx.QueryRow(ctx, t.s.q.slotsHeld, names).Scan(&held)
	return held, err
}

func (t permitTx) Take(ctx context.Context, id, name string, above uint64) (uint64, bool, bool, error) {
	var live bool
	var token *int64
	if err := t.tx.QueryRow(ctx, t.s.q.acquire, id, name, int64(above)).Scan(&live, &token); err != nil {
		return 0, false, false, err
	}
	return won(live, token)
}

func (t permitTx) SetSemaphore(ctx context.Context, sem string, permits int, token uint64) error {
	_, err := t.tx.Exec(ctx, t.s.q.setSem, sem, permits, int64(token))
	return err
}

func (s *dialect) Release(ctx context.Context, id, name string, token uint64) error {
	return retry(ctx, func() error { return s.boundedExec(ctx, s.q.release, name, id, int64(token)) })
}

// JoinGroup, LeaveGroup, CloseSession and Cleanup run again, like the
// statements above, when aborted with a serialization failure: at
// REPEATABLE READ or SERIALIZABLE, closing a session whose keep-alive
// renewed it after the statement's snapshot (or deleting a member or an
// expired session that another node deleted) fails that way, where READ
// COMMITTED takes the latest version. The join, the leave and the close
// run under the lock_timeout of ctx, as the acquire does (see bound.go):
// a row of theirs held by a transaction that outlasts the call (the
// membership or the session row) ends the wait on the server before the
// deadline, with lock_not_available, instead of whenever the cancel
// request arrives, if it does.
func (s *dialect) JoinGroup(ctx context.Context, id, group string) (int, bool, error) {
	var live bool
	var n int64
	if err := retry(ctx, func() error {
		return s.boundedRow(ctx, s.q.join, []any{id, group}, &live, &n)
	}); err != nil {
		return 0, false, err
	}
	return int(n), live, nil
}

func (s *dialect) LeaveGroup(ctx context.Context, id, group string) error {
	return retry(ctx, func() error { return s.boundedExec(ctx, s.q.leave, group, id) })
}

func (s *dialect) CloseSession(ctx context.Context, id string) error {
	return retry(ctx, func() error { return s.boundedExec(ctx, s.q.closeSession, id) })
}

func (s *dialect) Holder(ctx context.Context, name string) (simba.Holder, bool, error) {
	return sqlcore.ScanHolder(s.pool.QueryRow(ctx, s.q.holder, name).Scan, pgx.ErrNoRows)
}

func (s *dialect) ListHolders(ctx context.Context, from, after, below string, scan, limit int) ([]simba.HeldLease, string, int, error) {
	rows, err := s.pool.Query(ctx, s.q.list, from, after, below, scan, limit)
	if err != nil {
		return nil, "", 0, err
	}
	return sqlcore.ReadHolders(rows)
}

func (s *dialect) Cleanup(ctx context.Context, limit int) (int, error) {
	var tag pgconn.CommandTag
	if err := retry(ctx, func() error {
		var err error
		tag, err = s.pool.Exec(ctx, s.q.cleanup, limit)
		return err
	}); err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// Sweep runs one batch under the lock_timeout of ctx, as the acquire
// does (see bound.go): a batch that waits for a row lock past it is
// rolled back, and fails with an error matching context.DeadlineExceeded.
// Left waiting on the server (a cancel request lost), it would hold the
// floor, and every first acquire of a name would wait behind it.
func (s *dialect) Sweep(ctx context.Context, idle time.Duration, after string, limit int) (string, int, error) {
	var last *string
	var looked, removed int64
	if err := retry(ctx, func() error {
		return s.boundedRow(ctx, s.q.sweep, []any{after, limit, sqlcore.Micros(idle)}, &last, &looked, &removed)
	}); lockTimedOut(err) {
		return "", 0, sqlcore.WaitBoundError(err)
	} else if err != nil {
		return "", 0, err
	}
	if last == nil || looked < int64(limit) {
		return "", int(removed), nil
	}
	return *last, int(removed), nil
}

// Undefined recognises undefined_table (42P01) and undefined_column
// (42703).
func (s *dialect) Undefined(err error) (string, bool, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" && pgErr.Code != "42703" {
		return "", false, false
	}
	return pgErr.Message, pgErr.Code == "42P01", true
}

// Listen registers a watch of name with the listener (sqlcore.ReleaseWatcher).
func (s *dialect) Listen(ctx context.Context, name string) (fired, ready <-chan struct{}, drop func(), err error) {
	return s.l.Listen(ctx, name)
}

// ListenError is why the listener's last attempt to listen failed
// (sqlcore.ReleaseWatcher).
func (s *dialect) ListenError() error { return s.l.ListenError() }

// Watch marks the lease row of name watched and reports whether a live
// session owns it (pgWatch).
func (s *dialect) Watch(ctx context.Context, name string) (bool, error) {
	var held bool
	err := retry(ctx, func() error { return s.boundedRow(ctx, s.q.watch, []any{name}, &held) })
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return held, err
}

// Close stops the listener.
func (s *dialect) Close() { s.l.Close() }
