package simbasql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrInvalidFence is matched (with errors.Is) by the errors of
	// NewFence and of a Fence used with the wrong arguments: a token above
	// math.MaxInt64, a value count that differs from FenceTable.Columns, or
	// a pgx handle on a MySQL fence.
	ErrInvalidFence = errors.New("simbasql: invalid fence")

	// ErrFenceRowMissing is matched by the error of a fenced write to a key
	// that has no row: create it first with Fence.Init (or an INSERT of
	// your own with token 0).
	ErrFenceRowMissing = errors.New("simbasql: fence row missing")
)

// FenceTable names a table of your own whose rows are fenced resources:
// each row holds the highest fencing token accepted for its key. The
// token column must be a BIGINT (64-bit integer) that is 0 in a new row,
// and the key column must be unique, typically the primary key.
//
//	CREATE TABLE ledger_state (
//	    id            bigint PRIMARY KEY,
//	    fencing_token bigint NOT NULL DEFAULT 0,
//	    last_batch    text
//	);
//
// Every name is a plain identifier matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$;
// Table may also be schema-qualified ("ledger.state"). Names are quoted in
// the SQL, so on PostgreSQL they are case-sensitive: give them as stored,
// normally in lower case.
type FenceTable struct {
	Table   string   // e.g. "ledger_state"
	Key     string   // the unique key column, e.g. "id"
	Token   string   // the token column, e.g. "fencing_token"
	Columns []string // the columns a fenced write sets, in the order of its values; may be empty
}

// Fence performs fenced writes on the rows of a FenceTable: the spec's
// conditional UPDATE, which sets the columns and the token only where the
// row's token is at most the write's token (R-FEN-1). The comparison and
// the update are one statement, so the check and the write are atomic;
// equal tokens are accepted, so a retry within one term succeeds.
//
// Build it once with NewFence; it holds only the prepared SQL text and is
// safe for concurrent use. Write and Init take a database/sql handle
// (*sql.DB, *sql.Conn, *sql.Tx; PostgreSQL through the pgx stdlib driver
// works too), WritePgx and InitPgx a pgx one (*pgxpool.Pool, *pgx.Conn,
// pgx.Tx).
//
// Inside a transaction, a fenced write also takes the row's lock until
// commit: make it the first statement and every write after it in the same
// transaction is fenced as well, since a concurrent writer of the key waits
// for the commit and then compares against the committed token. With
// FenceTable.Columns empty, Write only checks and records the token, which
// is exactly that use.
type Fence struct {
	dialect Dialect
	table   string // as given, for messages
	columns int
	update  string // SET columns, token WHERE key AND token <= write's
	current string // the row's token, locked
	insert  string // the row with token 0 unless it exists
}

var fenceIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// NewFence checks t and returns the fence of its rows on dialect. It does
// not contact the database, and fails with an error matching
// ErrInvalidFence on an unknown dialect, a name that is not a plain
// identifier, or columns that repeat or name the key or token column.
func NewFence(dialect Dialect, t FenceTable) (*Fence, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidFence, fmt.Sprintf(format, args...))
	}
	if dialect != Postgres && dialect != MySQL {
		return nil, bad("dialect %q: want %q or %q", dialect, Postgres, MySQL)
	}
	schema, table, qualified := strings.Cut(t.Table, ".")
	if !qualified {
		schema, table = "", t.Table
	}
	named := []struct{ field, name string }{{"Table", table}, {"Key", t.Key}, {"Token", t.Token}}
	if qualified {
		named = append(named, struct{ field, name string }{"Table", schema})
	}
	for i, c := range t.Columns {
		named = append(named, struct{ field, name string }{fmt.Sprintf("Columns[%d]", i), c})
	}
	seen := make(map[string]string)
	for _, n := range named {
		if !fenceIdent.MatchString(n.name) {
			return nil, bad("%s %q is not a plain identifier (^[A-Za-z_][A-Za-z0-9_]{0,62}$)", n.field, n.name)
		}
		if n.field == "Table" {
			continue
		}
		// MySQL column names are case-insensitive, so compare folded.
		if prev, dup := seen[strings.ToLower(n.name)]; dup {
			return nil, bad("%s %q is also %s", n.field, n.name, prev)
		}
		seen[strings.ToLower(n.name)] = n.field
	}

	q := func(name string) string {
		if dialect == MySQL {
			return "`" + name + "`"
		}
		return `"` + name + `"`
	}
	qt := q(table)
	if qualified {
		qt = q(schema) + "." + qt
	}
	key, token := q(t.Key), q(t.Token)
	f := &Fence{dialect: dialect, table: t.Table, columns: len(t.Columns)}
	var set strings.Builder
	if dialect == Postgres {
		// $1..$n the values, $n+1 the token, $n+2 the key.
		n := len(t.Columns)
		for i, c := range t.Columns {
			fmt.Fprintf(&set, "%s = $%d, ", q(c), i+1)
		}
		f.update = fmt.Sprintf("UPDATE %s SET %s%s = $%d WHERE %s = $%d AND %s <= $%d",
			qt, set.String(), token, n+1, key, n+2, token, n+1)
		f.current = fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 FOR UPDATE", token, qt, key)
		f.insert = fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES ($1, 0) ON CONFLICT DO NOTHING", qt, key, token)
		return f, nil
	}
	// The values, the token, the key, the token again.
	for _, c := range t.Columns {
		fmt.Fprintf(&set, "%s = ?, ", q(c))
	}
	f.update = fmt.Sprintf("UPDATE %s SET %s%s = ? WHERE %s = ? AND %s <= ?", qt, set.String(), token, key, token)
	f.current = fmt.Sprintf("SELECT %s FROM %s WHERE %s = ? FOR UPDATE", token, qt, key)
	f.insert = fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (?, 0) ON DUPLICATE KEY UPDATE %s = %s", qt, key, token, key, key)
	return f, nil
}

// SQLHandle is what a Fence needs from a database/sql handle: *sql.DB,
// *sql.Conn and *sql.Tx all have it.
type SQLHandle interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// PgxHandle is what a Fence needs from a pgx handle: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all have it.
type PgxHandle interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Init creates the row of key with token 0 unless it exists, so that
// fenced writes to key can start. It sets only the key and token columns:
// when other columns of the table need a value, insert the row yourself.
func (f *Fence) Init(ctx context.Context, db SQLHandle, key any) error {
	if db == nil {
		return fmt.Errorf("%w: nil database handle", ErrInvalidFence)
	}
	return f.init(ctx, sqlRunner{db}, key)
}

// InitPgx is Init on a pgx handle; the fence must be a Postgres one.
func (f *Fence) InitPgx(ctx context.Context, db PgxHandle, key any) error {
	r, err := f.pgx(db)
	if err != nil {
		return err
	}
	return f.init(ctx, r, key)
}

// Write sets the fence's columns to values and the token column to token
// in the row of key if the row's token is at most token, and reports
// whether it did. A stale write returns false and a nil error and changes
// nothing. values are passed as parameters, one per FenceTable.Columns.
//
// When the update matches no row, Write reads the row's token (locking
// it) to tell the cases apart: a higher token is a stale write; an equal
// token is a retry that changed nothing, reported as accepted (MySQL
// counts such a row as unchanged unless the connection sets
// CLIENT_FOUND_ROWS, and Write works either way); no row at all is
// ErrFenceRowMissing.
//
// An error other than ErrInvalidFence or ErrFenceRowMissing means the
// outcome is unknown outside a transaction; retrying with the same token
// and values is safe.
func (f *Fence) Write(ctx context.Context, db SQLHandle, key any, token uint64, values ...any) (accepted bool, err error) {
	if db == nil {
		return false, fmt.Errorf("%w: nil database handle", ErrInvalidFence)
	}
	return f.write(ctx, sqlRunner{db}, key, token, values)
}

// WritePgx is Write on a pgx handle; the fence must be a Postgres one.
func (f *Fence) WritePgx(ctx context.Context, db PgxHandle, key any, token uint64, values ...any) (accepted bool, err error) {
	r, err := f.pgx(db)
	if err != nil {
		return false, err
	}
	return f.write(ctx, r, key, token, values)
}

func (f *Fence) pgx(db PgxHandle) (runner, error) {
	switch {
	case db == nil:
		return nil, fmt.Errorf("%w: nil database handle", ErrInvalidFence)
	case f.dialect != Postgres:
		return nil, fmt.Errorf("%w: a pgx handle on a %s fence (pgx is PostgreSQL only)", ErrInvalidFence, f.dialect)
	}
	return pgxRunner{db}, nil
}

func (f *Fence) init(ctx context.Context, r runner, key any) error {
	if _, err := r.exec(ctx, f.insert, key); err != nil {
		return fmt.Errorf("simbasql: fence %s: create row: %w", f.table, err)
	}
	return nil
}

func (f *Fence) write(ctx context.Context, r runner, key any, token uint64, values []any) (bool, error) {
	if token > math.MaxInt64 {
		return false, fmt.Errorf("%w: token %d does not fit a BIGINT", ErrInvalidFence, token)
	}
	if len(values) != f.columns {
		return false, fmt.Errorf("%w: %d values for %d columns", ErrInvalidFence, len(values), f.columns)
	}
	tok := int64(token)
	args := make([]any, 0, len(values)+3)
	args = append(args, values...)
	if f.dialect == Postgres {
		args = append(args, tok, key)
	} else {
		args = append(args, tok, key, tok)
	}
	n, err := r.exec(ctx, f.update, args...)
	switch {
	case err != nil:
		return false, fmt.Errorf("simbasql: fence %s: write: %w", f.table, err)
	case n == 1:
		return true, nil
	case n > 1:
		return false, fmt.Errorf("simbasql: fence %s: write matched %d rows: the key column must be unique", f.table, n)
	}
	current, found, err := r.token(ctx, f.current, key)
	switch {
	case err != nil:
		return false, fmt.Errorf("simbasql: fence %s: read token: %w", f.table, err)
	case !found:
		return false, fmt.Errorf("%w: table %s, key %v", ErrFenceRowMissing, f.table, key)
	case current == tok:
		return true, nil // an unchanged retry, as MySQL reports it
	case current > tok:
		return false, nil // stale
	}
	// Lower than a token the update did not accept: something wrote the
	// row without a fence in between.
	return false, fmt.Errorf("simbasql: fence %s: token of key %v went down to %d during the write", f.table, key, current)
}

// runner runs a fence's statements on one kind of handle.
type runner interface {
	// exec returns the number of rows the statement matched or changed.
	exec(ctx context.Context, q string, args ...any) (int64, error)
	// token reads one BIGINT; found is false when there is no row.
	token(ctx context.Context, q string, args ...any) (v int64, found bool, err error)
}

type sqlRunner struct{ db SQLHandle }

func (s sqlRunner) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (s sqlRunner) token(ctx context.Context, q string, args ...any) (int64, bool, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, q, args...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

type pgxRunner struct{ db PgxHandle }

func (p pgxRunner) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := p.db.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (p pgxRunner) token(ctx context.Context, q string, args ...any) (int64, bool, error) {
	var v int64
	err := p.db.QueryRow(ctx, q, args...).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}
