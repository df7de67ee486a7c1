package simbapg

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

// boundStatement sets, for the transaction only, how long one statement
// may run and the transaction may stay idle: $1 milliseconds.
const boundStatement = `SELECT set_config('statement_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $1, true)`

// TxBeginner begins the transactions of InTerm: *pgxpool.Pool, *pgx.Conn
// or a pgx.Tx (then InTerm runs in a savepoint of it, and the outer
// transaction's commit is the one that counts).
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// TermTx sets up the transactions of InTermTx.
type TermTx struct {
	// TablePrefix is the Options.TablePrefix of the backend whose lease the
	// term holds; "" is DefaultTablePrefix.
	TablePrefix string
	// TxOptions are the transaction's isolation level and access mode;
	// the zero value is the server's default (READ COMMITTED unless set).
	TxOptions pgx.TxOptions
}

// InTerm runs fn in a transaction of db that commits only if term still
// holds its lease: InTermTx with the default TermTx.
func InTerm(ctx context.Context, db TxBeginner, term *simba.Term, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return InTermTx(ctx, db, term, TermTx{}, fn)
}

// InTermTx runs fn in a transaction of db that first confirms, under a
// share lock on the lease's row held until it ends, that term still holds
// its lease (the row names the term's session and token). A take-over, a
// release or a sweep of the lease must write that row, so it waits for the
// transaction: the writes of fn commit before another term of the name can
// begin, or not at all. The data fn writes needs no token column.
//
//   - When the row names another term, or the term is no longer valid,
//     nothing is written and InTermTx returns an error matching
//     simba.ErrTermExpired.
//   - The transaction is bounded by the term: its ctx, which fn gets, ends
//     when the term ends; it commits only while the term is valid; and the
//     server ends it once one statement has run, or it has been idle, for
//     as long as the term had left when it began (statement_timeout and
//     idle_in_transaction_session_timeout, set for the transaction only).
//     So a holder paused with the transaction open (a stopped process, a
//     partition) delays the next owner by at most that much: at most one
//     lease duration. An error of fn or of the commit caused by the end of
//     the term matches simba.ErrTermExpired too.
//   - An error returned by fn rolls the transaction back and is returned
//     as it is, so that a retry loop recognises a serialization failure
//     (SQLSTATE 40001) and runs InTermTx again.
//
// db may be any pool or connection of the database that holds the
// backend's tables, the backend's own or the caller's; opts.TablePrefix
// must be the backend's. Every isolation level works: the check is the
// transaction's first statement, so at REPEATABLE READ and SERIALIZABLE
// its snapshot is taken after the lock.
func InTermTx(ctx context.Context, db TxBeginner, term *simba.Term, opts TermTx, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	left, err := sqlcore.TermStart(pkg.Name, db == nil, fn == nil, term)
	if err != nil {
		return err
	}
	check, err := sqlcore.TermStatement(true, opts.TablePrefix)
	if err != nil {
		return fmt.Errorf("%s: InTerm: %w", pkg.Name, err)
	}
	ctx, stop := sqlcore.TermContext(ctx, term)
	defer stop()
	tx, err := db.BeginTx(ctx, opts.TxOptions)
	if err != nil {
		return sqlcore.TermError(pkg.Name, term, fmt.Errorf("%s: InTerm: begin: %w", pkg.Name, err))
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	bound := strconv.FormatInt(max(left.Milliseconds(), 1), 10)
	batch := &pgx.Batch{}
	batch.Queue(boundStatement, bound)
	batch.Queue(check, term.Name(), string(term.Session()), int64(term.Token()))
	br := tx.SendBatch(ctx, batch)
	_, err = br.Exec()
	var one int
	if err == nil {
		err = br.QueryRow().Scan(&one)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return sqlcore.TermCommit(pkg.Name, term, err, pgx.ErrNoRows, func() error { return fn(ctx, tx) },
		func() error { return tx.Commit(ctx) })
}

// TermSQLTx sets up the transactions of InTermSQL.
type TermSQLTx struct {
	// TablePrefix is the Options.TablePrefix of the backend whose lease the
	// term holds; "" is DefaultTablePrefix.
	TablePrefix string
	// TxOptions are the transaction's isolation level and access mode; nil
	// is the server's default.
	TxOptions *sql.TxOptions
}

// InTermSQL is InTermTx for database/sql: db is a *sql.DB of the pgx
// stdlib driver ("pgx"), and fn gets a *sql.Tx. The check, the bounds and
// the errors are InTermTx's; the bounds take a round trip of their own.
func InTermSQL(ctx context.Context, db *sql.DB, term *simba.Term, opts TermSQLTx, fn func(ctx context.Context, tx *sql.Tx) error) error {
	bounds := sqlcore.TermBounds{Tx: func(ctx context.Context, tx *sql.Tx, left time.Duration) error {
		if _, err := tx.ExecContext(ctx, boundStatement, strconv.FormatInt(max(left.Milliseconds(), 1), 10)); err != nil {
			return fmt.Errorf("%s: InTerm: bound the transaction: %w", pkg.Name, err)
		}
		return nil
	}}
	return sqlcore.InTermSQL(ctx, pkg.Name, true, db, term, opts.TablePrefix, opts.TxOptions, bounds, fn)
}
