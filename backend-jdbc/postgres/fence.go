// Code generated from internal/sqlcore/templates/fence.go.tmpl by go generate; DO NOT EDIT.

package simbapg

import (
	"context"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
)

// FenceTable names a table of your own whose rows are fenced resources:
// each row holds the highest fencing token accepted for its key. The
// token column must be a bigint that is 0 in a new row, and the key column
// must be unique, typically the primary key.
//
//	CREATE TABLE ledger_state (
//	    id            bigint PRIMARY KEY,
//	    fencing_token bigint NOT NULL DEFAULT 0,
//	    last_batch    text
//	);
//
// Every name is a plain identifier matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$;
// Table may also be schema-qualified ("ledger.state"). Names are quoted in
// the SQL, so they are case-sensitive: give them as stored, normally in
// lower case.
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
// Build it once with NewFence; it holds only the SQL text and is safe for
// concurrent use. Write and Init take a database/sql handle (*sql.DB,
// *sql.Conn, *sql.Tx of the pgx stdlib driver), WritePgx and InitPgx a pgx
// one (*pgxpool.Pool, *pgx.Conn, pgx.Tx).
//
// Inside a transaction, a fenced write also takes the row's lock until
// commit: make it the first statement and every write after it in the same
// transaction is fenced as well, since a concurrent writer of the key waits
// for the commit and then compares against the committed token. With
// FenceTable.Columns empty, Write only checks and records the token, which
// is exactly that use.
type Fence struct {
	f *sqlcore.Fence
}

// NewFence checks t and returns the fence of its rows. It does not contact
// the database, and fails with an error matching ErrInvalidFence on a name
// that is not a plain identifier, or columns that repeat or name the key or
// token column.
func NewFence(t FenceTable) (*Fence, error) {
	f, err := pkg.NewFence(true, sqlcore.FenceTable(t))
	if err != nil {
		return nil, err
	}
	return &Fence{f: f}, nil
}

// SQLHandle is what a Fence needs from a database/sql handle:
//
//	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
//	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
//
// *sql.DB, *sql.Conn and *sql.Tx all have it. It is the same type in
// simbapg and simbamysql, so code serving both databases can hold either
// package's *Fence behind one interface of its own.
type SQLHandle = sqlcore.SQLHandle

// Init creates the row of key with token 0 unless it exists, so that
// fenced writes to key can start. It sets only the key and token columns:
// when other columns of the table need a value, insert the row yourself.
func (f *Fence) Init(ctx context.Context, db SQLHandle, key any) error {
	if db == nil {
		return f.f.NilHandle()
	}
	return f.f.Init(ctx, sqlcore.SQLRunner{DB: db}, key)
}

// Write sets the fence's columns to values and the token column to token
// in the row of key if the row's token is at most token, and reports
// whether it did. A stale write returns false and a nil error and changes
// nothing. values are passed as parameters, one per FenceTable.Columns.
//
// When the update matches no row, Write reads the row's token (locking it)
// to tell the cases apart: a higher token is a stale write; no row at all
// is ErrFenceRowMissing.
//
// An error other than ErrInvalidFence or ErrFenceRowMissing means the
// outcome is unknown outside a transaction; retrying with the same token
// and values is safe.
func (f *Fence) Write(ctx context.Context, db SQLHandle, key any, token uint64, values ...any) (accepted bool, err error) {
	if db == nil {
		return false, f.f.NilHandle()
	}
	return f.f.Write(ctx, sqlcore.SQLRunner{DB: db}, key, token, values)
}
