package sqlcore

import (
	"context"
	"fmt"

	simba "github.com/simba-go/simba/core"
)

// PermitTx runs the statements of one permit acquire in a transaction of
// the dialect's, at READ COMMITTED whatever the connections' default, so
// that each statement reads the rows committed before it starts, those
// committed while an earlier statement waited for a lock included.
type PermitTx interface {
	// LockSemaphore inserts the record of sem, with permits and token 0,
	// unless it exists, locks it until the transaction ends, and returns
	// its permits and token as of the lock.
	LockSemaphore(ctx context.Context, sem string, permits int) (recorded int, token uint64, err error)
	// Held reports whether a session live by the database clock owns one
	// of the leases names. It locks the owners' session rows in share
	// mode and judges them in their latest version, so that a keep-alive
	// in flight is waited for and counted.
	Held(ctx context.Context, names []string) (bool, error)
	// Take is the slot's acquire, with the rules of Dialect.Acquire, its
	// token also above above. A take-over that a later statement must
	// confirm (MySQL) reports won with the caller live; Take returns the
	// token in both cases.
	Take(ctx context.Context, id, name string, above uint64) (token uint64, won, live bool, err error)
	// SetSemaphore stores permits and token in the record of sem.
	SetSemaphore(ctx context.Context, sem string, permits int, token uint64) error
}

// PermitResult is the outcome of Dialect.AcquirePermit.
type PermitResult struct {
	Token     uint64
	Won, Live bool
	// Recorded is the semaphore's recorded number of permits when it
	// differs from the one asked with and a live session owns one of its
	// slots (a mismatch: nothing changed); 0 otherwise.
	Recorded int
}

// PermitSteps runs a permit acquire's statements in tx: it locks the
// semaphore's record, so that the permit acquires of one semaphore run
// one at a time; when the recorded permits differ from p.Permits it looks
// for a live owner of the slots they count, in a statement that starts
// after the lock, and refuses the call if there is one; then it takes
// the slot with a token above the record's and stores the permits and
// the new token in the record. The record is never deleted, so a slot's
// token is above every token of the semaphore's slots before it, whatever
// a sweep removed. The dialect commits tx.
func PermitSteps(ctx context.Context, tx PermitTx, id string, p simba.Permit) (PermitResult, error) {
	recorded, top, err := tx.LockSemaphore(ctx, p.Semaphore, p.Permits)
	if err != nil {
		return PermitResult{}, fmt.Errorf("lock the semaphore's record: %w", err)
	}
	if recorded != p.Permits {
		names := make([]string, recorded)
		for i := range names {
			names[i] = simba.PermitName(p.Semaphore, i)
		}
		held, err := tx.Held(ctx, names)
		if err != nil {
			return PermitResult{}, fmt.Errorf("check the slots of %d permits: %w", recorded, err)
		}
		if held {
			return PermitResult{Live: true, Recorded: recorded}, nil
		}
	}
	token, won, live, err := tx.Take(ctx, id, simba.PermitName(p.Semaphore, p.Slot), top)
	if err != nil || !live {
		return PermitResult{}, err
	}
	if won {
		top = token
	}
	if won || recorded != p.Permits {
		if err := tx.SetSemaphore(ctx, p.Semaphore, p.Permits, top); err != nil {
			return PermitResult{}, fmt.Errorf("update the semaphore's record: %w", err)
		}
	}
	return PermitResult{Token: token, Won: won, Live: true}, nil
}
