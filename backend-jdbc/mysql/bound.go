package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
)

// Server-side bounds of the statements that may wait for a row lock.
//
// go-sql-driver abandons a statement whose ctx ends by closing the
// connection, but the server goes on running it, lock waits included,
// until innodb_lock_wait_timeout ends them (50 s by default): a statement
// given up at a deadline of 200 ms would wait on for the better part of a
// minute, and a node retrying every attempt would pile such statements up.
// So on MariaDB every statement that may wait for a lock runs as
//
//	SET STATEMENT max_statement_time=<bound> FOR <statement>
//
// with a bound below the call's deadline: the largest of waitSteps that is
// at most three quarters of the time the ctx has left, so that the server
// ends the statement (a lock wait too: it is interrupted) before the client
// gives up, with time left for the answer and the next statement of the
// call. max_statement_time takes fractions of a second; SET STATEMENT takes
// no placeholder, so each (statement, step) is prepared once, when first
// used. A ctx without a deadline, or with more than the largest step left,
// runs the statement as it is, under the server's own timeouts.
//
// MySQL 8 has no SET STATEMENT, and its SET_VAR hint takes no InnoDB
// variable: there a statement given up waits on server-side until
// innodb_lock_wait_timeout, holding no lock a keep-alive needs (see
// myTakeOver); lower innodb_lock_wait_timeout to bound it.
var waitSteps = []time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 50 * time.Second,
}

// waitStep returns the index in waitSteps of the bound of a statement run
// with ctx, -1 for none: the largest step within sqlcore.WaitBound, the
// smallest below it (a call with less than 7 ms left may still be answered
// in time).
func waitStep(ctx context.Context) int {
	allowed, ok := sqlcore.WaitBound(ctx)
	if !ok || allowed > waitSteps[len(waitSteps)-1] {
		return -1
	}
	step := 0
	for i, d := range waitSteps {
		if d <= allowed {
			step = i
		}
	}
	return step
}

// boundKey names statement k prepared with the bound waitSteps[step].
type boundKey struct {
	k    myStmt
	step int
}

// bounded returns statement k, bounded for ctx on MariaDB.
func (s *dialect) bounded(ctx context.Context, k myStmt) (*sql.Stmt, error) {
	s.mu.Lock()
	if s.stmts == nil || s.closed {
		s.mu.Unlock()
		return nil, errNotPrepared
	}
	step := -1
	if s.mariadb {
		step = waitStep(ctx)
	}
	if step < 0 {
		st := s.stmts[k]
		s.mu.Unlock()
		return st, nil
	}
	key := boundKey{k, step}
	st := s.boundStmts[key]
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, boundPrefix(step)+s.t.Expand(myStatements[k]))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // meanwhile
		st.Close()
		return nil, errNotPrepared
	}
	if had := s.boundStmts[key]; had != nil { // a concurrent call prepared it too
		st.Close()
		return had, nil
	}
	s.boundStmts[key] = st
	return st, nil
}

// boundText returns q, a statement built for one call (not prepared), with
// the bound of ctx on MariaDB.
func (s *dialect) boundText(ctx context.Context, q string) string {
	s.mu.Lock()
	mariadb := s.mariadb
	s.mu.Unlock()
	if step := waitStep(ctx); mariadb && step >= 0 {
		return boundPrefix(step) + q
	}
	return q
}

// boundPrefix is the start of a statement bounded at waitSteps[step].
func boundPrefix(step int) string {
	return "SET STATEMENT max_statement_time=" + strconv.FormatFloat(waitSteps[step].Seconds(), 'f', -1, 64) + " FOR "
}

// waited reports whether err says that the server ended a statement at its
// bound or at a lock wait timeout: ER_STATEMENT_TIMEOUT (1969, MariaDB's
// max_statement_time), ER_LOCK_WAIT_TIMEOUT (1205). Run in autocommit, the
// statement was rolled back: it changed nothing.
func waited(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && (myErr.Number == 1969 || myErr.Number == 1205)
}
