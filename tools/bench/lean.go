package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The lean pair (impl "lean") is the least a fenced row lease can cost on
// a SQL database: one write to acquire, one to release, with a token that
// only grows and the holder's expiry checked. It is not a safe lock (a
// keep-alive of the holder racing a take-over is not waited for), only a
// floor for Simba's own statements. Its tables have the shape of Simba's
// (name and id primary keys, the same columns and indexes), under a prefix
// of the run's own, and hold leanSessions live sessions; worker w acquires
// as session w. acquired_at has a default, as the pair never writes it.
const (
	implLean     = "lean"
	leanSessions = 100
)

// leanSchema is one dialect's lean pair, written with the bare names
// lean_lease, lean_session and lean_token.
type leanSchema struct {
	create  []string // the tables (and the token sequence)
	session string   // inserts one live session, the id as parameter
	drop    []string
	// acquire takes a name (parameters: name, session, and on MySQL the
	// session again) and yields its token; release frees it (name,
	// session, token).
	acquire, release string
}

// pgLeanSchema: tokens from a sequence, the take-over in the ON CONFLICT
// clause. The statements are those measured with pgbench, whose default
// protocol sends the parameters as literals; over the extended protocol
// $2 needs its type named once ($2::varchar), or PostgreSQL deduces text
// in the select list and varchar in the comparison, and refuses it.
var pgLeanSchema = leanSchema{
	create: []string{
		`CREATE TABLE lean_session (
    id         varchar(32) COLLATE "C" PRIMARY KEY,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    identity   varchar(256) NOT NULL DEFAULT '',
    lease_gen  bigint NOT NULL DEFAULT 0
)`,
		`CREATE INDEX lean_session_exp ON lean_session (expires_at)`,
		`CREATE TABLE lean_lease (
    name        varchar(128) COLLATE "C" PRIMARY KEY,
    session_id  varchar(32) COLLATE "C",
    token       bigint NOT NULL CHECK (token > 0),
    acquired_at timestamptz NOT NULL DEFAULT now()
)`,
		`CREATE INDEX lean_lease_sid ON lean_lease (session_id)`,
		`CREATE SEQUENCE lean_token`,
	},
	session: `INSERT INTO lean_session (id, expires_at) VALUES ($1, now() + interval '1 day')`,
	drop:    []string{`DROP TABLE IF EXISTS lean_lease, lean_session`, `DROP SEQUENCE IF EXISTS lean_token`},
	acquire: `INSERT INTO lean_lease AS l (name, session_id, token)
  SELECT $1, $2::varchar, nextval('lean_token')
  WHERE EXISTS (SELECT 1 FROM lean_session m WHERE m.id = $2 AND m.expires_at > clock_timestamp())
ON CONFLICT (name) DO UPDATE SET session_id = excluded.session_id, token = excluded.token
  WHERE l.session_id IS NULL
     OR NOT EXISTS (SELECT 1 FROM lean_session o WHERE o.id = l.session_id AND o.expires_at > clock_timestamp())
RETURNING token`,
	release: `UPDATE lean_lease SET session_id = NULL WHERE name = $1 AND session_id = $2 AND token = $3`,
}

// myLeanSchema: one INSERT ... ON DUPLICATE KEY UPDATE, whose assignments
// run left to right: the row goes to the caller when it is free or its
// holder expired, and then the token grows by one if the row names the
// caller. LAST_INSERT_ID(expr) hands the token back in the OK packet; the
// changed-rows count says whether the caller won (1 inserted, 2 taken
// over, 0 held elsewhere or the caller not live).
var myLeanSchema = leanSchema{
	create: []string{
		`CREATE TABLE lean_session (
    id         CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    expires_at DATETIME(6) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    identity   VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    lease_gen  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (id),
    KEY lean_session_exp (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
		`CREATE TABLE lean_lease (
    name        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id  CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    token       BIGINT NOT NULL,
    acquired_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (name),
    KEY lean_lease_sid (session_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	},
	session: `INSERT INTO lean_session (id, expires_at, created_at) VALUES (?, UTC_TIMESTAMP(6) + INTERVAL 1 DAY, UTC_TIMESTAMP(6))`,
	drop:    []string{`DROP TABLE IF EXISTS lean_lease, lean_session`},
	acquire: `INSERT INTO lean_lease (name, session_id, token)
  SELECT ?, ?, LAST_INSERT_ID(1) FROM DUAL
  WHERE EXISTS (SELECT 1 FROM lean_session m WHERE m.id = ? AND m.expires_at > UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
  session_id = IF(lean_lease.session_id IS NULL
     OR NOT EXISTS (SELECT 1 FROM lean_session o WHERE o.id = lean_lease.session_id AND o.expires_at > UTC_TIMESTAMP(6)),
     VALUES(session_id), lean_lease.session_id),
  token = IF(lean_lease.session_id = VALUES(session_id), LAST_INSERT_ID(lean_lease.token + 1), lean_lease.token)`,
	release: `UPDATE lean_lease SET session_id = NULL WHERE name = ? AND session_id = ? AND token = ?`,
}

// execer runs a statement that returns no rows.
type execer interface {
	exec(ctx context.Context, sql string, args ...any) error
}

type pgExec struct{ p *pgxpool.Pool }

func (e pgExec) exec(ctx context.Context, sql string, args ...any) error {
	_, err := e.p.Exec(ctx, sql, args...)
	return err
}

type sqlExec struct{ db *sql.DB }

func (e sqlExec) exec(ctx context.Context, sql string, args ...any) error {
	_, err := e.db.ExecContext(ctx, sql, args...)
	return err
}

// leanTables are the lean pair's tables of one run.
type leanTables struct {
	prefix   string     // of every table, index and sequence name
	schema   leanSchema // with the prefix in place
	sessions []string   // the live sessions' ids
}

// newLeanTables creates the tables of sc under a new prefix and inserts
// the live sessions; drop removes them.
func newLeanTables(ctx context.Context, db execer, sc leanSchema) (*leanTables, error) {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails
	t := &leanTables{prefix: "simbabench_" + hex.EncodeToString(b[:]) + "_"}
	r := strings.NewReplacer("lean_", t.prefix+"lean_")
	under := func(ss []string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = r.Replace(s)
		}
		return out
	}
	t.schema = leanSchema{
		create: under(sc.create), session: r.Replace(sc.session), drop: under(sc.drop),
		acquire: r.Replace(sc.acquire), release: r.Replace(sc.release),
	}
	err := func() error {
		for _, st := range t.schema.create {
			if err := db.exec(ctx, st); err != nil {
				return err
			}
		}
		for i := range leanSessions {
			id := fmt.Sprintf("lean%028d", i)
			if err := db.exec(ctx, t.schema.session, id); err != nil {
				return err
			}
			t.sessions = append(t.sessions, id)
		}
		return nil
	}()
	if err != nil {
		return nil, errors.Join(err, t.drop(db))
	}
	return t, nil
}

// drop removes the tables, whatever state the run left them in.
func (t *leanTables) drop(db execer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, st := range t.schema.drop {
		errs = append(errs, db.exec(ctx, st))
	}
	return errors.Join(errs...)
}

// leanStore runs the lean pair on a client of its own.
type leanStore interface {
	// acquire reports whether session took name, and the token it won.
	acquire(ctx context.Context, name, session string) (token int64, won bool, err error)
	// release reports whether the lease was session's with token.
	release(ctx context.Context, name, session string, token int64) (bool, error)
}

// leanOp returns the lean pair's acquire+release: worker w takes names[w]
// as session w and gives it back.
func leanOp(st leanStore, sessions, names []string) (opFunc, error) {
	if len(names) > len(sessions) {
		return nil, fmt.Errorf("%d workers, %d live sessions", len(names), len(sessions))
	}
	return func(ctx context.Context, w int) error {
		token, won, err := st.acquire(ctx, names[w], sessions[w])
		if err != nil {
			return err
		}
		if !won {
			return fmt.Errorf("lean acquire %s: held elsewhere", names[w])
		}
		ok, err := st.release(ctx, names[w], sessions[w], token)
		if err == nil && !ok {
			err = fmt.Errorf("lean release %s: not held with token %d", names[w], token)
		}
		return err
	}, nil
}

// pgLean is the lean pair on a pgx pool: both statements are prepared by
// pgx's statement cache on each connection.
type pgLean struct {
	p *pgxpool.Pool
	t *leanTables
}

func (l pgLean) acquire(ctx context.Context, name, session string) (int64, bool, error) {
	var token int64
	err := l.p.QueryRow(ctx, l.t.schema.acquire, name, session).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

func (l pgLean) release(ctx context.Context, name, session string, token int64) (bool, error) {
	tag, err := l.p.Exec(ctx, l.t.schema.release, name, session, token)
	return err == nil && tag.RowsAffected() == 1, err
}

// myLean is the lean pair on a database/sql pool of the MySQL driver,
// prepared. The pool must report changed rows (no clientFoundRows), or a
// lost acquire would read as an insert.
type myLean struct {
	acq, rel *sql.Stmt
}

func newMyLean(ctx context.Context, db *sql.DB, t *leanTables) (*myLean, error) {
	acq, err := db.PrepareContext(ctx, t.schema.acquire)
	if err != nil {
		return nil, err
	}
	rel, err := db.PrepareContext(ctx, t.schema.release)
	if err != nil {
		return nil, errors.Join(err, acq.Close())
	}
	return &myLean{acq: acq, rel: rel}, nil
}

func (l *myLean) close() error { return errors.Join(l.acq.Close(), l.rel.Close()) }

func (l *myLean) acquire(ctx context.Context, name, session string) (int64, bool, error) {
	res, err := l.acq.ExecContext(ctx, name, session, session)
	if err != nil {
		return 0, false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, false, err
	}
	token, err := res.LastInsertId()
	if err == nil && token <= 0 {
		err = fmt.Errorf("lean acquire %s: no token (%d rows changed)", name, n)
	}
	return token, err == nil, err
}

func (l *myLean) release(ctx context.Context, name, session string, token int64) (bool, error) {
	res, err := l.rel.ExecContext(ctx, name, session, token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
