package sqltest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// TxScripter is an Admin that can also run several statements in one
// transaction left open, their row locks held, until commit is called.
type TxScripter interface {
	ScriptInTx(ctx context.Context, stmts []string) (commit func() error, err error)
}

// testFirstInsertAfterSweep (R-TERM-2): B takes n and gives it back, and
// a sweep batch removes n's row; A's acquire then finds no row for n, and
// the sweep's raise of the floor commits while A's insert runs. A's token
// must be above B's, whatever the isolation level of the connections: the
// insert must read the floor the sweep raised, not the one of a snapshot
// from before. Only where the acquire is more than one statement
// (MySQL/MariaDB) can anything run between its read and its insert. The
// sweep's transaction is split in two here, the delete committed first,
// so that A's read finds no row without waiting, and the raise of the
// floor in flight when A inserts.
func testFirstInsertAfterSweep(t *testing.T, f *fixture) {
	if !f.h.SplitAcquire {
		t.Skip("the acquire is one statement: nothing runs between its read of the name and its insert")
	}
	scripter, ok := f.admin.(TxScripter)
	if !ok {
		t.Skip("the admin client runs no transaction of several statements")
	}
	b := f.backend()
	a, other := open(t, b, time.Minute), open(t, b, time.Minute)
	s := bTermAndSweep(f, scripter, b, other)
	if s.err != nil {
		t.Fatalf("B's term and the sweep: %v", s.err)
	}
	t.Cleanup(func() { _ = s.commit() })
	done := goCall(func() (simba.AcquireResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		return b.Acquire(ctx, a, "n")
	})
	await(t, "A's insert waiting for the sweep", func() bool {
		select {
		case r := <-done:
			t.Fatalf("A's acquire returned %+v, %v without waiting for the sweep in flight", r.v, r.err)
		default:
		}
		return f.lockWaits(t) > 0
	})
	if err := s.commit(); err != nil {
		t.Fatalf("commit the sweep: %v", err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("A's acquire: %v", res.err)
	}
	if !res.v.Won || res.v.Token <= s.last {
		t.Fatalf("A's acquire of n after the sweep = %+v, want a win with a token above B's %d (R-TERM-2)", res.v, s.last)
	}
}

// sweepInFlight is a sweep batch's transaction that removed a row of B's.
type sweepInFlight struct {
	last   uint64 // B's token
	commit func() error
	err    error
}

// bTermAndSweep has session other take n and give it back, then does what
// a sweep batch removing n's row does: the row deleted (committed), then,
// in a transaction left open, the floor locked and raised to its token.
func bTermAndSweep(f *fixture, scripter TxScripter, b simba.Backend, other simba.SessionID) (s sweepInFlight) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := b.Acquire(ctx, other, "n")
	if err == nil && !r.Won {
		err = errors.New("the other session lost a free name")
	}
	if err == nil {
		err = b.Release(ctx, other, "n", r.Token)
	}
	p := f.prefix
	if err == nil {
		err = f.admin.Exec(ctx, "DELETE FROM "+p+"lease WHERE name = 'n' AND session_id IS NULL")
	}
	if err != nil {
		s.err = err
		return s
	}
	s.last = r.Token
	s.commit, s.err = scripter.ScriptInTx(context.Background(), []string{
		"SELECT token FROM " + p + "lease_floor WHERE id = 1 FOR UPDATE",
		fmt.Sprintf("UPDATE %slease_floor SET token = %d WHERE id = 1 AND token < %d", p, r.Token, r.Token),
	})
	return s
}
