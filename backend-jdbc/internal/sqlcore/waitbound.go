package sqlcore

import (
	"context"
	"fmt"
	"time"
)

// WaitBound returns how long the server may let a statement of a call
// with ctx wait for a row lock: three quarters of the time ctx has left,
// so that the server ends the wait, and its error and the call's next
// statement reach the client, before the call's deadline. ok is false
// without a deadline. The drivers give a statement up at its deadline by
// closing the connection (go-sql-driver) or by a cancel request that
// arrives later, if at all (pgx): without a bound of its own the server
// would go on waiting (on MariaDB for innodb_lock_wait_timeout, 50 s by
// default) and hold what the statement had locked (ADR 0018).
func WaitBound(ctx context.Context) (bound time.Duration, ok bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return max(time.Until(deadline)*3/4, 0), true
}

// WaitBoundError returns the error of a statement that the server ended
// at its bound, err being the server's: it matches
// context.DeadlineExceeded, the call's deadline having come for the
// server, and err.
func WaitBoundError(err error) error {
	return fmt.Errorf("%w: the server ended a lock wait at its bound: %w", context.DeadlineExceeded, err)
}
