package simbamysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

// TermTx sets up the transactions of InTermTx.
type TermTx struct {
	// TablePrefix is the Options.TablePrefix of the backend whose lease the
	// term holds; "" is DefaultTablePrefix.
	TablePrefix string
	// TxOptions are the transaction's isolation level and access mode; nil
	// is the server's default (REPEATABLE READ unless set).
	TxOptions *sql.TxOptions
}

// InTerm runs fn in a transaction of db that commits only if term still
// holds its lease: InTermTx with the default TermTx.
func InTerm(ctx context.Context, db *sql.DB, term *simba.Term, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return InTermTx(ctx, db, term, TermTx{}, fn)
}

// InTermTx runs fn in a transaction of db that first confirms, under a
// share lock on the lease's row held until it ends (LOCK IN SHARE MODE),
// that term still holds its lease (the row names the term's session and
// token). A take-over, a release or a sweep of the lease must write that
// row, so it waits for the transaction: the writes of fn commit before
// another term of the name can begin, or not at all. The data fn writes
// needs no token column.
//
//   - When the row names another term, or the term is no longer valid,
//     nothing is written and InTermTx returns an error matching
//     simba.ErrTermExpired.
//   - The transaction is bounded by the term: its ctx, which fn gets, ends
//     when the term ends; it commits only while the term is valid; and on
//     MariaDB the server ends it once it has been idle, or one statement
//     has run, for as long as the term had left when it began
//     (idle_transaction_timeout, rounded up to whole seconds, and
//     max_statement_time, set on the transaction's connection and reset
//     after it). So a holder paused with the transaction open (a stopped
//     process, a partition) delays the next owner by at most that much: at
//     most one lease duration and a second. MySQL has neither variable:
//     there a paused holder delays the next owner until its connection
//     dies (wait_timeout), and the take-over's lock waits keep failing
//     meanwhile. An error of fn or of the commit caused by the end of the
//     term matches simba.ErrTermExpired too.
//   - An error returned by fn rolls the transaction back and is returned
//     as it is, so that a retry loop recognises a deadlock or a lock wait
//     timeout (MySQL errors 1213 and 1205) and runs InTermTx again.
//
// db may be any pool of the database that holds the backend's tables, the
// backend's own or the caller's; opts.TablePrefix must be the backend's.
// Every isolation level works: a locking read reads the latest committed
// row whatever the level.
func InTermTx(ctx context.Context, db *sql.DB, term *simba.Term, opts TermTx, fn func(ctx context.Context, tx *sql.Tx) error) error {
	bounds := sqlcore.TermBounds{Conn: boundTransactions, After: unbound}
	return sqlcore.InTermSQL(ctx, pkg.Name, false, db, term, opts.TablePrefix, opts.TxOptions, bounds, fn)
}

// boundTransactions sets MariaDB's idle_transaction_timeout and
// max_statement_time on conn to left (the first in whole seconds, rounded
// up). It reports false, with no error, on a server without them (MySQL).
func boundTransactions(ctx context.Context, conn *sql.Conn, left time.Duration) (bool, error) {
	idle := int64(math.Ceil(left.Seconds()))
	stmt := fmt.Sprintf("SET SESSION idle_transaction_timeout = %d, max_statement_time = %.3f", max(idle, 1), max(left.Seconds(), 0.001))
	_, err := conn.ExecContext(ctx, stmt)
	var myErr *mysql.MySQLError
	switch {
	case errors.As(err, &myErr) && myErr.Number == 1193: // unknown system variable
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: InTerm: bound the transaction: %w", pkg.Name, err)
	}
	return true, nil
}

// unbound gives conn its server's defaults back before it returns to the
// pool, and has the pool drop it when that fails.
func unbound(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "SET SESSION idle_transaction_timeout = DEFAULT, max_statement_time = DEFAULT"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}
