package sqltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The tests of this file force each order in which a sweep and a
// take-over, a release, a keep-alive or another sweep can wait for a lock
// the other holds: a transaction of the test's own holds a row, the calls
// are started, the server is asked until it shows them waiting for a lock,
// and only then is the row let go. Whatever order the server then runs
// them in, no name may have two valid holders and tokens must increase.

// sweepIdle is the idle of the sweeps below, the shortest there is.
const sweepIdle = time.Second

// sweeper is a backend that sweeps.
type sweeper interface {
	simba.Backend
	simba.Sweeper
}

// raceBackend returns a backend that Open made, on a connection pool of
// its own: the calls that wait must not take the connections the test's
// own statements need.
func (f *fixture) raceBackend(t testing.TB) sweeper {
	t.Helper()
	b, ok := f.open(t).(sweeper)
	if !ok {
		t.Fatal("the backend does not sweep")
	}
	return b
}

// outcome is what a call started by goCall returned.
type outcome[T any] struct {
	v   T
	err error
}

// goCall runs fn in a goroutine of its own; its outcome arrives on the
// channel returned.
func goCall[T any](fn func() (T, error)) <-chan outcome[T] {
	ch := make(chan outcome[T], 1)
	go func() {
		v, err := fn()
		ch <- outcome[T]{v, err}
	}()
	return ch
}

// raceWait bounds how long the server may take to show a wait: MariaDB
// refreshes what information_schema.innodb_trx shows only after 100ms
// without a reader, which clients polling it at once can put off.
const raceWait = 30 * time.Second

// ctxRace is the context of a call that waits for a lock: longer than
// ctxT, so that neither the call nor its server-side bound ends while the
// test waits for the server to show the waits.
func ctxRace(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*raceWait)
	t.Cleanup(cancel)
	return ctx
}

// awaitRace calls cond every 200ms (see await) until it returns true, for
// at most raceWait.
func awaitRace(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(raceWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, raceWait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// awaitWaits waits until the server shows n statements on the fixture's
// tables waiting for a row lock.
func (f *fixture) awaitWaits(t testing.TB, what string, n int) {
	t.Helper()
	awaitRace(t, what, func() bool { return f.lockWaits(t) >= int64(n) })
}

// awaitWaitsOr is awaitWaits for a call that may also return without
// waiting on some backend: its outcome is then returned (and n-1 waits
// are enough), nil if it waits.
func awaitWaitsOr[T any](t testing.TB, f *fixture, what string, n int, ch <-chan outcome[T]) *outcome[T] {
	t.Helper()
	var got *outcome[T]
	awaitRace(t, what, func() bool {
		if got == nil {
			select {
			case o := <-ch:
				got = &o
			default:
			}
		}
		want := n
		if got != nil {
			want--
		}
		return f.lockWaits(t) >= int64(want)
	})
	return got
}

// result returns early if it is set, else what ch delivers.
func result[T any](early *outcome[T], ch <-chan outcome[T]) outcome[T] {
	if early != nil {
		return *early
	}
	return <-ch
}

// hold runs q in a transaction left open, its row locks held, until the
// returned commit (or the end of the test).
func (f *fixture) hold(t testing.TB, what, q string, args ...any) (commit func() error) {
	t.Helper()
	commit, err := f.admin.ExecInTx(ctxRace(t), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { _ = commit() }) // a no-op once committed
	return commit
}

// holdFloor locks the floor row, as a sweep under way does.
func (f *fixture) holdFloor(t testing.TB) func() error {
	return f.hold(t, "lock the floor row", "SELECT token FROM "+f.prefix+"lease_floor WHERE id = 1 FOR UPDATE")
}

// lockLease locks name's lease row, as a take-over or a delete does.
func (f *fixture) lockLease(t testing.TB, name string) func() error {
	return f.hold(t, "lock the lease row", "SELECT name FROM "+f.prefix+"lease WHERE name = ? FOR UPDATE", name)
}

// shareLease locks name's lease row in share mode, as a take-over or a
// sweep reading its owner may: an exclusive lock (a delete, an update)
// waits for it, another share lock does not.
func (f *fixture) shareLease(t testing.TB, name string) func() error {
	mode := "FOR SHARE"
	if f.h.Quote == "`" { // MariaDB has no FOR SHARE; MySQL 8 has both
		mode = "LOCK IN SHARE MODE"
	}
	return f.hold(t, "share-lock the lease row", "SELECT name FROM "+f.prefix+"lease WHERE name = ? "+mode, name)
}

// backdate makes the term of name's row begin an hour ago, as if it had
// been idle that long.
func (f *fixture) backdate(t testing.TB, names ...string) {
	t.Helper()
	q := "UPDATE " + f.prefix + "lease SET acquired_at = " + f.h.Later(-3600) + " WHERE name IN (" +
		strings.TrimSuffix(strings.Repeat("?,", len(names)), ",") + ")"
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	if err := f.admin.Exec(ctxT(t), q, args...); err != nil {
		t.Fatalf("backdate %v: %v", names, err)
	}
}

// leaseRow reads name's row: its owner ("" when free) and token; ok is
// false without a row.
func (f *fixture) leaseRow(t testing.TB, name string) (owner string, token int64, ok bool) {
	t.Helper()
	var n int64
	q := "SELECT COUNT(*), COALESCE(MAX(session_id), ''), COALESCE(MAX(token), 0) FROM " + f.prefix + "lease WHERE name = ?"
	if err := f.admin.Scan(ctxT(t), q, []any{name}, &n, &owner, &token); err != nil {
		t.Fatalf("read the lease row of %q: %v", name, err)
	}
	return owner, token, n > 0
}

// floorToken reads the floor.
func (f *fixture) floorToken(t testing.TB) int64 {
	t.Helper()
	var n int64
	if err := f.scalar(ctxT(t), "SELECT token FROM "+f.prefix+"lease_floor WHERE id = 1", &n); err != nil {
		t.Fatalf("read the floor: %v", err)
	}
	return n
}

// wantHeld fails unless s holds name with token by its row, its
// keep-alive and the refusal of another live session, and unless, once
// s gave it back, the next term of name gets a larger token.
func (f *fixture) wantHeld(t testing.TB, b simba.Backend, s simba.SessionID, name string, token uint64, why string) {
	t.Helper()
	if owner, tok, ok := f.leaseRow(t, name); !ok || owner != string(s) || uint64(tok) != token {
		t.Fatalf("%s: the row of %q is (row %v, owner %q, token %d), want %s's at %d", why, name, ok, owner, tok, s, token)
	}
	if got := keepAlive(t, b, s, time.Minute, name).Owned; got[name] != token {
		t.Fatalf("%s: the keep-alive of the holder lists %v, want %s:%d", why, got, name, token)
	}
	other := open(t, b, time.Minute)
	if r := acquire(t, b, other, name); r.Won {
		t.Fatalf("%s: another session won %q with token %d while %s holds it with token %d", why, name, r.Token, s, token)
	}
	if err := b.Release(ctxT(t), s, name, token); err != nil {
		t.Fatalf("release: %v", err)
	}
	if r := acquire(t, b, other, name); !r.Won || r.Token <= token {
		t.Fatalf("%s: the next term of %q = %+v, want a win above %d", why, name, r, token)
	}
}

// testSweepRaceTakeOverAhead: a take-over of a free name (or of one whose
// owner expired) and a sweep both wait for a row the take-over needs (the
// floor row, or the name's lease row) and the sweep, begun more than idle
// after the take-over, runs once the take-over won. The sweep must keep
// the won row: deleting it leaves the winner a valid term while the next
// acquire of the name wins too.
func testSweepRaceTakeOverAhead(t *testing.T, f *fixture) {
	for i, tt := range []struct{ name, held string }{
		{"floor row held", "floor"},
		{"lease row held", "lease"},
		{"lease row held, owner expired", "lease"},
	} {
		held := tt.held
		t.Run(tt.name, func(t *testing.T) {
			b := f.raceBackend(t)
			first, a := open(t, b, time.Minute), open(t, b, time.Minute)
			n := fmt.Sprintf("ahead-%d", i)
			prev := acquire(t, b, first, n).Token
			if i == 2 {
				f.expire(first)
			} else if err := b.Release(ctxT(t), first, n, prev); err != nil {
				t.Fatal(err)
			}
			f.backdate(t, n)
			commit := f.holdFloor
			if held == "lease" {
				commit = func(t testing.TB) func() error { return f.lockLease(t, n) }
			}
			release := commit(t)

			began := time.Now()
			won := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), a, n) })
			early := awaitWaitsOr(t, f, "the take-over waiting for the "+held+" row", 1, won)
			if early != nil {
				t.Logf("the take-over did not wait for the %s row: %+v, %v", held, early.v, early.err)
			}
			// A take-over that stamps its term with the time its statement
			// began makes it look idle to a sweep begun idle later.
			time.Sleep(time.Until(began.Add(sweepIdle + 100*time.Millisecond)))
			swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
			waits := 2
			if early != nil {
				waits = 1
			}
			f.awaitWaits(t, "the sweep waiting", waits)
			if err := release(); err != nil {
				t.Fatalf("commit: %v", err)
			}
			res := result(early, won)
			if res.err != nil || !res.v.Won || res.v.Token <= prev {
				t.Fatalf("the take-over = %+v, %v; want a win above %d", res.v, res.err, prev)
			}
			if o := <-swept; o.err != nil {
				t.Fatalf("Sweep: %v", o.err)
			}
			f.wantHeld(t, b, a, n, res.v.Token, "after the sweep that waited")
		})
	}
}

// testSweepRaceTakeOverBehind: a sweep holds the floor (and the rows it
// deleted so far) while it waits for a row another transaction holds; a
// take-over of a free name of the batch, and the first acquire of a name
// never used, wait behind it where they need what it holds. Once it
// committed, both win, above every token their names had, and keep what
// they won.
func testSweepRaceTakeOverBehind(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	first, a, d := open(t, b, time.Minute), open(t, b, time.Minute), open(t, b, time.Minute)
	const n, m, fresh = "a-taken", "b-held", "c-fresh"
	var prev [2]uint64
	for i, name := range []string{n, m} {
		prev[i] = acquire(t, b, first, name).Token
		if err := b.Release(ctxT(t), first, name, prev[i]); err != nil {
			t.Fatal(err)
		}
	}
	f.backdate(t, n, m)
	release := f.lockLease(t, m)

	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	f.awaitWaits(t, "the sweep waiting for the held row", 1)
	waits := 1
	won := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), a, n) })
	earlyWon := awaitWaitsOr(t, f, "the take-over waiting behind the sweep", waits+1, won)
	if earlyWon == nil {
		waits++
	} else {
		t.Logf("the take-over did not wait behind the sweep: %+v, %v", earlyWon.v, earlyWon.err)
	}
	first0 := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), d, fresh) })
	earlyFirst := awaitWaitsOr(t, f, "the first acquire waiting behind the sweep", waits+1, first0)
	if earlyFirst != nil {
		t.Logf("the first acquire of a name did not wait behind the sweep: %+v, %v", earlyFirst.v, earlyFirst.err)
	}
	if err := release(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o := <-swept; o.err != nil {
		t.Fatalf("Sweep: %v", o.err)
	}
	if r := result(earlyWon, won); r.err != nil || !r.v.Won || r.v.Token <= prev[0] {
		t.Fatalf("the take-over of %q = %+v, %v; want a win above %d", n, r.v, r.err, prev[0])
	} else {
		f.wantHeld(t, b, a, n, r.v.Token, "the take-over behind the sweep")
	}
	if r := result(earlyFirst, first0); r.err != nil || !r.v.Won {
		t.Fatalf("the first acquire of %q = %+v, %v; want a win", fresh, r.v, r.err)
	} else {
		f.wantHeld(t, b, d, fresh, r.v.Token, "the first acquire behind the sweep")
	}
	if r := acquire(t, b, first, m); !r.Won || r.Token <= prev[1] {
		t.Fatalf("the next term of the row the sweep waited for = %+v, want a win above %d", r, prev[1])
	}
}

// testSweepRaceReleaseAhead: a sweep waits for the row of a lease whose
// owner expired while the owner's release of it is in flight; once the
// release committed, the sweep removes the freed row, and the name's next
// term starts above its last token.
func testSweepRaceReleaseAhead(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	owner, other := open(t, b, time.Minute), open(t, b, time.Minute)
	const n = "released"
	tok := acquire(t, b, owner, n).Token
	f.backdate(t, n)
	f.expire(owner)
	release := f.hold(t, "a release in a transaction",
		"UPDATE "+f.prefix+"lease SET session_id = NULL WHERE name = ? AND session_id = ? AND token = ?", n, string(owner), int64(tok))
	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	f.awaitWaits(t, "the sweep waiting for the release", 1)
	if err := release(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o := <-swept; o.err != nil || o.v != 1 {
		t.Fatalf("Sweep = %d, %v; want the freed row removed", o.v, o.err)
	}
	if _, _, ok := f.leaseRow(t, n); ok {
		t.Fatalf("the row of %q survived the sweep", n)
	}
	if r := acquire(t, b, other, n); !r.Won || r.Token <= tok {
		t.Fatalf("the next term of %q = %+v, want a win above %d", n, r, tok)
	}
}

// testSweepRaceReleaseBehind: an owner whose session expired gives its
// leases back while a sweep that deleted one of them waits for another
// row: the release waits behind the sweep and then finds nothing to free
// (no error), and the names start again above their tokens.
func testSweepRaceReleaseBehind(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	owner, other := open(t, b, time.Minute), open(t, b, time.Minute)
	names := []string{"a-before", "b-held", "c-after"}
	toks := make([]uint64, len(names))
	for i, n := range names {
		toks[i] = acquire(t, b, owner, n).Token
	}
	f.backdate(t, names...)
	f.expire(owner)
	unlock := f.lockLease(t, names[1])
	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	f.awaitWaits(t, "the sweep waiting for the held row", 1)
	// The sweep goes through its batch in some order: it holds the rows
	// on one side of the one it waits for. Both are given back; at least
	// one release must wait behind it.
	waits, waited := 1, 0
	var released [2]<-chan outcome[struct{}]
	var early [2]*outcome[struct{}]
	for i, k := range []int{0, 2} {
		released[i] = goCall(func() (struct{}, error) {
			return struct{}{}, b.Release(ctxRace(t), owner, names[k], toks[k])
		})
		if early[i] = awaitWaitsOr(t, f, "the release of "+names[k], waits+1, released[i]); early[i] == nil {
			waits++
			waited++
		}
	}
	if waited == 0 {
		t.Fatalf("neither release waited behind the sweep, which waits for %q: it held neither %q nor %q", names[1], names[0], names[2])
	}
	if err := unlock(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o := <-swept; o.err != nil || o.v != len(names) {
		t.Fatalf("Sweep = %d, %v; want the %d rows of the expired owner removed", o.v, o.err, len(names))
	}
	for i := range released {
		if o := result(early[i], released[i]); o.err != nil {
			t.Fatalf("a release behind the sweep: %v", o.err)
		}
	}
	for i, n := range names {
		if r := acquire(t, b, other, n); !r.Won || r.Token <= toks[i] {
			t.Fatalf("the next term of %q = %+v, want a win above %d", n, r, toks[i])
		}
	}
}

// testSweepRaceKeepAliveBehind: a sweep that locked the session of an
// expired owner waits for the owner's lease row, and the owner's
// keep-alive waits behind the sweep: once the sweep removed the lease,
// the keep-alive finds the session expired (it is never renewed, and its
// lease never reported held), and the name starts above its token.
func testSweepRaceKeepAliveBehind(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	owner, other := open(t, b, time.Minute), open(t, b, time.Minute)
	const n = "kept-alive"
	tok := acquire(t, b, owner, n).Token
	f.backdate(t, n)
	f.expire(owner)
	unlock := f.shareLease(t, n)
	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	f.awaitWaits(t, "the sweep waiting for the lease row", 1)
	renewed := goCall(func() (simba.KeepAliveReply, error) { return b.KeepAlive(ctxRace(t), owner, unsure(time.Minute)) })
	early := awaitWaitsOr(t, f, "the keep-alive waiting behind the sweep", 2, renewed)
	if early != nil {
		t.Fatalf("the keep-alive of the owner did not wait behind the sweep holding its session: %+v, %v", early.v, early.err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o := <-swept; o.err != nil || o.v != 1 {
		t.Fatalf("Sweep = %d, %v; want the expired owner's row removed", o.v, o.err)
	}
	if o := <-renewed; !errors.Is(o.err, simba.ErrSessionExpired) {
		t.Fatalf("the keep-alive behind the sweep = %+v, %v; want simba.ErrSessionExpired", o.v, o.err)
	}
	if r := acquire(t, b, other, n); !r.Won || r.Token <= tok {
		t.Fatalf("the next term of %q = %+v, want a win above %d", n, r, tok)
	}
}

// testSweepRaceSweepBehind: a sweep waits for the floor behind another,
// which waits for a row: each idle row is removed once, the floor ends at
// the highest token removed, and every name starts again above it.
func testSweepRaceSweepBehind(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	s := open(t, b, time.Minute)
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("idle-%02d", i)
	}
	const base = 1000
	f.insertIdle(t, names, func(i int) uint64 { return uint64(base + 10*i) })
	unlock := f.lockLease(t, names[4])
	first := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	f.awaitWaits(t, "the first sweep waiting for the held row", 1)
	second := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	f.awaitWaits(t, "the second sweep waiting for the floor", 2)
	if err := unlock(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	o1, o2 := <-first, <-second
	if o1.err != nil || o2.err != nil || o1.v+o2.v != len(names) {
		t.Fatalf("the sweeps = (%d, %v) and (%d, %v); want the %d idle rows removed once", o1.v, o1.err, o2.v, o2.err, len(names))
	}
	highest := int64(base + 10*(len(names)-1))
	if got := f.floorToken(t); got != highest {
		t.Fatalf("the floor is %d after the sweeps, want %d", got, highest)
	}
	for _, n := range names {
		if r := acquire(t, b, s, n); !r.Won || int64(r.Token) <= highest {
			t.Fatalf("%q after the sweeps = %+v, want a win above %d", n, r, highest)
		}
	}
}

// testSweepRaceInsertAhead: the acquire of a name whose first row another
// transaction is inserting waits for it, holding what it read of the floor
// (on PostgreSQL), and a sweep waits behind that acquire: the acquire then
// takes the new row over above its token and keeps it.
func testSweepRaceInsertAhead(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	a := open(t, b, time.Minute)
	const n, tok = "inserted", 70
	unlock := f.hold(t, "a first insert in a transaction",
		"INSERT INTO "+f.prefix+"lease (name, session_id, token, acquired_at) VALUES (?, NULL, ?, "+f.h.Later(-3600)+")", n, tok)
	won := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), a, n) })
	f.awaitWaits(t, "the acquire waiting for the insert", 1)
	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	if early := awaitWaitsOr(t, f, "the sweep waiting behind the acquire", 2, swept); early != nil {
		t.Logf("the sweep did not wait behind the acquire: %d, %v", early.v, early.err)
		swept = func() <-chan outcome[int] { ch := make(chan outcome[int], 1); ch <- *early; return ch }()
	}
	if err := unlock(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	r := <-won
	if r.err != nil || !r.v.Won || r.v.Token <= tok {
		t.Fatalf("the acquire = %+v, %v; want a win above %d", r.v, r.err, tok)
	}
	if o := <-swept; o.err != nil {
		t.Fatalf("Sweep: %v", o.err)
	}
	f.wantHeld(t, b, a, n, r.v.Token, "after the sweep behind the acquire")
}

// testTakeOverRaceKeepAliveBehind: a take-over from an owner that expired
// holds what it read of the owner while it waits for the name's row (held
// by another transaction, as a release in flight would), and the owner's
// keep-alive comes meanwhile. The keep-alive may wait behind the
// take-over (PostgreSQL: the take-over share-locks the owner's session)
// but never renews an owner the take-over judged expired: once the row
// is let go, the taker holds the name and the owner is expired.
func testTakeOverRaceKeepAliveBehind(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	owner, taker := open(t, b, time.Minute), open(t, b, time.Minute)
	const n = "taken"
	tok := acquire(t, b, owner, n).Token
	f.expire(owner)
	unlock := f.shareLease(t, n)
	won := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), taker, n) })
	f.awaitWaits(t, "the take-over waiting for the lease row", 1)
	renewed := goCall(func() (simba.KeepAliveReply, error) { return b.KeepAlive(ctxRace(t), owner, unsure(time.Minute)) })
	early := awaitWaitsOr(t, f, "the owner's keep-alive waiting behind the take-over", 2, renewed)
	if early != nil {
		t.Logf("the owner's keep-alive did not wait behind the take-over: %+v, %v", early.v, early.err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	r := <-won
	if r.err != nil || !r.v.Won || r.v.Token <= tok {
		t.Fatalf("the take-over = %+v, %v; want a win above %d", r.v, r.err, tok)
	}
	if o := result(early, renewed); !errors.Is(o.err, simba.ErrSessionExpired) {
		t.Fatalf("the expired owner's keep-alive = %+v, %v; want simba.ErrSessionExpired", o.v, o.err)
	}
	f.wantHeld(t, b, taker, n, r.v.Token, "after the owner's keep-alive")
}

// testCloseRaceKeepAliveAhead: a session closed while its keep-alive is
// in flight waits for the keep-alive and then closes (whatever the
// isolation level: at REPEATABLE READ and SERIALIZABLE PostgreSQL aborts
// the close of a row renewed since its snapshot, and the close must run
// again), freeing its leases.
func testCloseRaceKeepAliveAhead(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	s, other := open(t, b, time.Minute), open(t, b, time.Minute)
	const n = "closed"
	tok := acquire(t, b, s, n).Token
	if _, err := b.JoinGroup(ctxT(t), s, "g"); err != nil {
		t.Fatal(err)
	}
	renewal := f.hold(t, "renewal in a transaction", f.renewSQL(), string(s))
	closed := goCall(func() (struct{}, error) { return struct{}{}, b.CloseSession(ctxRace(t), s) })
	if o := awaitWaitsOr(t, f, "the close waiting for the renewal", 1, closed); o != nil {
		t.Fatalf("CloseSession returned (%v) while the session's renewal was in flight", o.err)
	}
	if err := renewal(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o := <-closed; o.err != nil {
		t.Fatalf("CloseSession behind its keep-alive: %v", o.err)
	}
	if r := acquire(t, b, other, n); !r.Won || r.Token <= tok {
		t.Fatalf("the lease of the closed session = %+v, want a win above %d", r, tok)
	}
	if got, err := b.JoinGroup(ctxT(t), other, "g"); err != nil || got != 1 {
		t.Fatalf("JoinGroup after the close = %d, %v; want 1 member", got, err)
	}
}

// testTakeOverRaceReleaseAhead: a take-over from an owner that expired
// waits for the lease row while the owner's release of it is in flight.
// Once the release committed the row is free, and the take-over wins it,
// above its last token, as it would have had it come a moment later.
func testTakeOverRaceReleaseAhead(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	owner, taker := open(t, b, time.Minute), open(t, b, time.Minute)
	const n = "freed"
	tok := acquire(t, b, owner, n).Token
	f.expire(owner)
	release := f.hold(t, "a release in a transaction",
		"UPDATE "+f.prefix+"lease SET session_id = NULL WHERE name = ? AND session_id = ? AND token = ?", n, string(owner), int64(tok))
	won := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), taker, n) })
	f.awaitWaits(t, "the take-over waiting for the release", 1)
	if err := release(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	r := <-won
	if r.err != nil || !r.v.Won || r.v.Token <= tok {
		t.Fatalf("the take-over behind the release = %+v, %v; want a win above %d", r.v, r.err, tok)
	}
	f.wantHeld(t, b, taker, n, r.v.Token, "after the release it waited for")
}

// testSweepRaceCleanupAhead: a sweep locks the session of an expired
// owner while another node's cleanup is deleting that session: it waits,
// then finds no owner and removes the lease row, above whose token the
// name starts again.
func testSweepRaceCleanupAhead(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	owner, other := open(t, b, time.Minute), open(t, b, time.Minute)
	const n = "cleaned"
	tok := acquire(t, b, owner, n).Token
	f.backdate(t, n)
	f.expire(owner)
	cleanup := f.hold(t, "a cleanup in a transaction", "DELETE FROM "+f.prefix+"session WHERE id = ?", string(owner))
	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	if o := awaitWaitsOr(t, f, "the sweep waiting for the cleanup", 1, swept); o != nil {
		t.Fatalf("Sweep returned (%d, %v) while the owner's session was being deleted: it did not lock it", o.v, o.err)
	}
	if err := cleanup(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o := <-swept; o.err != nil || o.v != 1 {
		t.Fatalf("Sweep = %d, %v; want the row of the deleted owner removed", o.v, o.err)
	}
	if r := acquire(t, b, other, n); !r.Won || r.Token <= tok {
		t.Fatalf("the next term of %q = %+v, want a win above %d", n, r, tok)
	}
}

// testSweepRaceKeepAliveBehindLive: a sweep locked a live owner's session
// (its lease's term is old) and waits for another, idle row; the owner's
// keep-alive waits behind it (or not, where the sweep locks no session of
// a row it keeps) and renews once it is done, the owner keeping its lease.
func testSweepRaceKeepAliveBehindLive(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	owner, first := open(t, b, time.Minute), open(t, b, time.Minute)
	const n, m = "a-live", "b-idle"
	tok := acquire(t, b, owner, n).Token
	prev := acquire(t, b, first, m).Token
	if err := b.Release(ctxT(t), first, m, prev); err != nil {
		t.Fatal(err)
	}
	f.backdate(t, n, m)
	unlock := f.lockLease(t, m)
	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	f.awaitWaits(t, "the sweep waiting for the idle row", 1)
	renewed := goCall(func() (simba.KeepAliveReply, error) { return b.KeepAlive(ctxRace(t), owner, unsure(time.Minute)) })
	if early := awaitWaitsOr(t, f, "the owner's keep-alive waiting behind the sweep", 2, renewed); early != nil {
		t.Logf("the owner's keep-alive did not wait behind the sweep: %v", early.err)
		renewed = func() <-chan outcome[simba.KeepAliveReply] {
			ch := make(chan outcome[simba.KeepAliveReply], 1)
			ch <- *early
			return ch
		}()
	}
	if err := unlock(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o := <-swept; o.err != nil || o.v != 1 {
		t.Fatalf("Sweep = %d, %v; want the idle row removed, the live owner's kept", o.v, o.err)
	}
	if o := <-renewed; o.err != nil {
		t.Fatalf("the live owner's keep-alive behind the sweep: %v", o.err)
	}
	f.wantHeld(t, b, owner, n, tok, "after the sweep that locked its owner")
}
