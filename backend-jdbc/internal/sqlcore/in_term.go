package sqlcore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	simba "github.com/simba-go/simba/core"
)

// A transaction in a term (simbapg.InTerm, simbamysql.InTerm) first reads
// the term's lease row, by name, session and token, under a share lock
// held until the transaction ends. A take-over, a release or a sweep of
// the lease writes that row, so it waits for the transaction: the writes
// of a term commit before the next term of its name can begin, or, when
// the row no longer names the term, the transaction writes nothing. The
// server ends the transaction once it has been idle, or one statement has
// run, for as long as the term had left when it began, so that a holder
// paused with its transaction open delays the next owner by at most that
// much (docs/adr/0039-fenced-transactions.md).

// TermStatement returns the statement that checks and share-locks the
// lease row of a term, for PostgreSQL when postgres is set and for MySQL
// otherwise, with the tables of prefix ("" is DefaultTablePrefix). Its
// parameters are the name, the session id and the token; it returns one
// row when the term still owns the lease.
func TermStatement(postgres bool, prefix string) (string, error) {
	if prefix == "" {
		prefix = DefaultTablePrefix
	}
	if !prefixPattern.MatchString(prefix) {
		return "", fmt.Errorf("%w: table prefix %q must match ^[A-Za-z_][A-Za-z0-9_]{0,40}$", simba.ErrInvalidArgument, prefix)
	}
	lease := NewTables(prefix).Lease // spliced unquoted, as the backend's statements do
	if postgres {
		return "SELECT 1 FROM " + lease + " WHERE name = $1 AND session_id = $2 AND token = $3 FOR SHARE", nil
	}
	return "SELECT 1 FROM " + lease + " WHERE name = ? AND session_id = ? AND token = ? LOCK IN SHARE MODE", nil
}

// TermStart checks the arguments of a transaction in term t and returns
// how long the term has left: the bound of the transaction on the server.
// It fails with an error matching simba.ErrInvalidArgument on a nil
// handle, term or function, and simba.ErrTermExpired on a term no longer
// valid.
func TermStart(pkg string, nilDB, nilFn bool, t *simba.Term) (time.Duration, error) {
	switch {
	case nilDB:
		return 0, fmt.Errorf("%s: InTerm: %w: nil database handle", pkg, simba.ErrInvalidArgument)
	case t == nil:
		return 0, fmt.Errorf("%s: InTerm: %w: nil term", pkg, simba.ErrInvalidArgument)
	case nilFn:
		return 0, fmt.Errorf("%s: InTerm: %w: nil function", pkg, simba.ErrInvalidArgument)
	case t.Token() > math.MaxInt64:
		return 0, fmt.Errorf("%s: InTerm: %w: token %d above the largest BIGINT", pkg, simba.ErrInvalidArgument, t.Token())
	}
	left := t.Remaining()
	if left <= 0 {
		return 0, TermEnded(pkg, t, nil)
	}
	return left, nil
}

// TermEnded is the error of a transaction in term t that the term did not
// cover: the term ended before it or while it ran, or its lease row names
// another term; cause, when not nil, is the error that ended it.
func TermEnded(pkg string, t *simba.Term, cause error) error {
	err := fmt.Errorf("%s: InTerm: lease %q at token %d: %w", pkg, t.Name(), t.Token(), simba.ErrTermExpired)
	if cause != nil && !errors.Is(cause, simba.ErrTermExpired) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// TermContext returns ctx bounded by term: it ends, with cause
// simba.ErrTermExpired, when the term ends.
func TermContext(ctx context.Context, term *simba.Term) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(term.Context(), func() { cancel(simba.ErrTermExpired) })
	return ctx, func() { stop(); cancel(nil) }
}

// TermError is err, matching simba.ErrTermExpired as well when term has
// ended: the end of the term is then why the call failed.
func TermError(pkg string, term *simba.Term, err error) error {
	if term.Valid() || errors.Is(err, simba.ErrTermExpired) {
		return err
	}
	return TermEnded(pkg, term, err)
}

// TermCommit ends a transaction in term once its check ran: checked is
// the check's error (noRows, the driver's error of a query without a row:
// the lease row names another term). It then runs fn, and commit only
// while the term is valid. Its error says which step failed; the caller
// rolls the transaction back when there is one.
func TermCommit(pkg string, term *simba.Term, checked, noRows error, fn, commit func() error) error {
	switch {
	case errors.Is(checked, noRows):
		return TermEnded(pkg, term, nil)
	case checked != nil:
		return TermError(pkg, term, fmt.Errorf("%s: InTerm: check the lease: %w", pkg, checked))
	}
	if err := fn(); err != nil {
		return TermError(pkg, term, err)
	}
	if !term.Valid() {
		return TermEnded(pkg, term, nil)
	}
	if err := commit(); err != nil {
		return TermError(pkg, term, fmt.Errorf("%s: InTerm: commit: %w", pkg, err))
	}
	return nil
}
