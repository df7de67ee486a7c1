package sqlcore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
)

// TermBounds sets the server's bounds of a transaction in a term run by
// InTermSQL: Conn on the connection before the transaction (reporting
// whether After must undo it once the transaction ended), Tx as the
// transaction's first statement; either may be nil.
type TermBounds struct {
	Conn  func(ctx context.Context, conn *sql.Conn, left time.Duration) (bool, error)
	After func(conn *sql.Conn)
	Tx    func(ctx context.Context, tx *sql.Tx, left time.Duration) error
}

// InTermSQL is InTerm over database/sql, for PostgreSQL (the pgx stdlib
// driver) when postgres is set and for MySQL otherwise: on one connection
// of db, the bounds, then a transaction whose first statement checks the
// term's lease row under a share lock, then fn, then the commit while the
// term is valid. Its errors are the package pkg's.
func InTermSQL(ctx context.Context, pkg string, postgres bool, db *sql.DB, term *simba.Term, prefix string, txOpts *sql.TxOptions, bounds TermBounds, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	left, err := TermStart(pkg, db == nil, fn == nil, term)
	if err != nil {
		return err
	}
	check, err := TermStatement(postgres, prefix)
	if err != nil {
		return fmt.Errorf("%s: InTerm: %w", pkg, err)
	}
	ctx, stop := TermContext(ctx, term)
	defer stop()
	conn, err := db.Conn(ctx)
	if err != nil {
		return TermError(pkg, term, fmt.Errorf("%s: InTerm: %w", pkg, err))
	}
	defer conn.Close()
	if bounds.Conn != nil {
		bounded, err := bounds.Conn(ctx, conn, left)
		if err != nil {
			return TermError(pkg, term, err)
		}
		if bounded && bounds.After != nil {
			defer bounds.After(conn)
		}
	}
	tx, err := conn.BeginTx(ctx, txOpts)
	if err != nil {
		return TermError(pkg, term, fmt.Errorf("%s: InTerm: begin: %w", pkg, err))
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if bounds.Tx != nil {
		if err = bounds.Tx(ctx, tx, left); err != nil {
			return TermError(pkg, term, err)
		}
	}
	var one int
	err = tx.QueryRowContext(ctx, check, term.Name(), string(term.Session()), int64(term.Token())).Scan(&one)
	return TermCommit(pkg, term, err, sql.ErrNoRows, func() error { return fn(ctx, tx) }, tx.Commit)
}
