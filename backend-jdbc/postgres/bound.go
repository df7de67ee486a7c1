package simbapg

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
)

// Server-side bounds of the statements that may wait for a row lock: the
// acquire, the release, the keep-alive, the group statements, the close
// and the sweep.
//
// pgx abandons a statement whose ctx ends by closing the connection and
// sending a cancel request, which stops the server's lock wait once it
// arrives: shortly after the call's deadline, or not at all when the
// request is lost. So each of those statements is sent in a batch after
// set_config('lock_timeout', <bound>, true), in one round trip: a batch is
// one implicit transaction, so the setting lasts for the statement alone.
// The bound is three quarters of the time the ctx has left, in whole
// milliseconds (at least 1), so that the server ends a lock wait (with
// lock_not_available) before the client gives up. It bounds each wait; a
// statement waits for at most a few locks in turn (the acquire: its own
// session row, the lease row, the holder's session row, the floor), each
// for a moment unless a transaction holds one, so the statement as a whole
// ends by about the call's deadline. A ctx without a deadline sends the
// statement alone, under the server's own lock_timeout.
func lockTimeout(ctx context.Context) (string, bool) {
	bound, ok := sqlcore.WaitBound(ctx)
	if !ok {
		return "", false
	}
	return strconv.FormatInt(max(bound.Milliseconds(), 1), 10) + "ms", true
}

// boundedQuery runs q with args under the lock_timeout of ctx. The rows
// must be closed; closing them ends the batch.
func (s *dialect) boundedQuery(ctx context.Context, q string, args ...any) (pgx.Rows, error) {
	bound, ok := lockTimeout(ctx)
	if !ok {
		return s.pool.Query(ctx, q, args...)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, bound)
	b.Queue(q, args...)
	br := s.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// batchRows closes its batch with its rows. Err reports the batch's end
// too: the implicit transaction commits then, and a commit that fails (a
// serialization failure at SERIALIZABLE) undoes rows already read.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

// Next ends the batch after the last row, so that Err, read next, knows
// whether the transaction committed.
func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// boundedExec runs q, which returns no rows, under the lock_timeout of
// ctx.
func (s *dialect) boundedExec(ctx context.Context, q string, args ...any) error {
	rows, err := s.boundedQuery(ctx, q, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// boundedRow runs q under the lock_timeout of ctx and scans its one row.
func (s *dialect) boundedRow(ctx context.Context, q string, args []any, dest ...any) error {
	rows, err := s.boundedQuery(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	if rows.Next() {
		return errors.New("more than one row")
	}
	return rows.Err()
}

// lockTimedOut reports whether err is lock_not_available (55P03): the
// statement waited for a lock up to its bound and was rolled back.
func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
