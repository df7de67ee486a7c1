package simba_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// R-LOCK-1, R-LOCK-5: Acquire waits up to the ctx deadline; a second
// acquire of a name this client holds waits for the release.
func TestLockAcquireWaitsAndTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		l := c.Lock("inv")
		lt, err := l.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := l.Acquire(ctx); !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second Acquire: %v, want ErrLockTimeout", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("timed out after %v, want 2s", d)
		}
		got := make(chan *simba.LockTerm)
		go func() {
			lt2, err := l.Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- lt2
		}()
		time.Sleep(time.Second)
		if err := lt.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		lt2 := <-got
		if lt2.Token() <= lt.Token() || !lt2.Valid() || lt.Valid() {
			t.Fatalf("handover %v -> %v", lt.Term, lt2.Term)
		}
		_ = lt2.Close()
	})
}

// R-LOCK-7: a lock lost early is released for good.
func TestLockLostEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		// The first term is taken over at once: the keep-alive will revoke it.
		lt, err := c.Lock("x").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.TakeOver("x")
		time.Sleep(1100 * time.Millisecond)
		if lt.Valid() || lt.Reason() != simba.TakenOver {
			t.Fatalf("lock term valid=%v reason=%v after take-over", lt.Valid(), lt.Reason())
		}
		// R-LOCK-7: the lost lock is not re-acquired behind the user's back.
		if snap := c.Snapshot(); len(snap.Leases) != 0 && snap.Leases[0].State == simba.StateContending {
			t.Fatalf("lost lock contends again: %+v", snap.Leases)
		}
		if err := lt.EnsureValid(0); !errors.Is(err, simba.ErrTermExpired) {
			t.Fatalf("EnsureValid after loss: %v", err)
		}
		if err := lt.Release(context.Background()); err != nil {
			t.Fatalf("Release after loss: %v", err)
		}
	})
}

// R-LOCK-2: cancelling an acquire abandons it and releases what it won.
func TestLockCancelReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		rec := &acquireTimes{Backend: s.Connect(), hold: make(chan struct{})}
		c := newClient(t, rec)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, err := c.Lock("x").Acquire(ctx)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v", err)
		}
		close(rec.hold) // the acquire in flight wins now
		synctest.Wait()
		if id, _, ok := s.Owner("x"); ok {
			t.Fatalf("lock still held by %s after a cancelled acquire", id)
		}
	})
}

// R-LOCK-3: TryAcquire makes one attempt.
func TestTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c1 := newClient(t, s.Connect())
		c2 := newClient(t, s.Connect())
		lt, err := c1.Lock("x").TryAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c1.Lock("x").TryAcquire(context.Background()); !errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("TryAcquire of a name this client holds: %v", err)
		}
		if _, err := c2.Lock("x").TryAcquire(context.Background()); !errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("TryAcquire of a name another client holds: %v", err)
		}
		_ = lt.Release(context.Background())
		conn := s.Connect()
		conn.Stall()
		c3 := newClient(t, conn)
		start := time.Now()
		if _, err := c3.Lock("y").TryAcquire(context.Background()); !errors.Is(err, simba.ErrLockTimeout) ||
			!errors.Is(err, simba.ErrBackendUnavailable) || errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("TryAcquire on an unreachable backend: %v, want ErrBackendUnavailable and ErrLockTimeout", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("unanswered TryAcquire gave up after %v, want one lease duration", d)
		}
	})
}

// R-LOCK-6: a lock term released from another goroutine; release is
// idempotent.
func TestLockReleaseFromAnotherGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		lt, _ := c.Lock("x").Acquire(context.Background())
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := lt.Release(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if _, _, ok := s.Owner("x"); ok || lt.Reason() != simba.Stopped {
			t.Fatalf("owned=%v reason=%v", ok, lt.Reason())
		}
	})
}

// R-LOCK-8: a lock and an election of one name on one client are refused.
func TestLockElectionSameName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		_ = c.Election("x").Start(newRecorder())
		if _, err := c.Lock("x").TryAcquire(context.Background()); !errors.Is(err, simba.ErrNameInUse) {
			t.Fatalf("lock on an election's name: %v", err)
		}
		lt, _ := c.Lock("y").Acquire(context.Background())
		if err := c.Election("y").Start(newRecorder()); !errors.Is(err, simba.ErrNameInUse) {
			t.Fatalf("election on a lock's name: %v", err)
		}
		_ = lt.Close()
	})
}

// Bad input: every misuse is a clear error, never a panic.
func TestBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		if _, err := simba.New(nil); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Fatalf("New(nil): %v", err)
		}
		if _, err := simba.New(s, simba.WithConfig(simba.Config{LeaseDuration: -1})); !errors.Is(err, simba.ErrInvalidConfig) {
			t.Fatalf("negative lease: %v", err)
		}
		if _, err := simba.New(s, nil); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Fatalf("nil option: %v", err)
		}
		if _, err := simba.New(s, simba.WithLogger(nil)); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Fatalf("nil logger: %v", err)
		}
		c := newClient(t, s.Connect())
		if err := c.Election("bad name").Start(newRecorder()); !errors.Is(err, simba.ErrInvalidName) {
			t.Fatalf("bad name: %v", err)
		}
		if _, err := c.Lock("").Acquire(context.Background()); !errors.Is(err, simba.ErrInvalidName) {
			t.Fatalf("empty name: %v", err)
		}
		if s.Calls()[memory.OpAcquire] != 0 {
			t.Fatal("an invalid name reached the backend")
		}
		if err := c.Election("e").Start(nil); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Fatalf("nil listener: %v", err)
		}
		if _, err := c.Lock("e").Acquire(nil); !errors.Is(err, simba.ErrInvalidArgument) { //nolint:staticcheck // a nil context is the bad input under test
			t.Fatalf("nil ctx: %v", err)
		}
		if err := c.Election("never").Stop(context.Background()); !errors.Is(err, simba.ErrNotStarted) {
			t.Fatalf("stop of an unstarted election: %v", err)
		}
		_ = c.Close(context.Background())
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if err := c.Election("e").Start(newRecorder()); !errors.Is(err, simba.ErrClosed) {
			t.Fatalf("Start after Close: %v", err)
		}
		if _, err := c.Lock("e").Acquire(context.Background()); !errors.Is(err, simba.ErrClosed) {
			t.Fatalf("Acquire after Close: %v", err)
		}
		if err := c.Election("e").Stop(context.Background()); !errors.Is(err, simba.ErrClosed) {
			t.Fatalf("Stop after Close: %v", err)
		}
	})
}

// An acquire whose backend call hangs, made on the caller's goroutine,
// ends with Close at once, not when the call's own deadline passes.
func TestCloseEndsAnAcquireInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		c := newClient(t, conn)
		synctest.Wait() // the session is open
		conn.Delay(time.Hour)
		errc := make(chan error, 1)
		go func() {
			_, err := c.Lock("l").Acquire(context.Background())
			errc <- err
		}()
		time.Sleep(100 * time.Millisecond)
		conn.Delay(0) // calls from now on go through; the acquire still waits
		start := time.Now()
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-errc; !errors.Is(err, simba.ErrClosed) {
			t.Fatalf("acquire ended with %v, want ErrClosed", err)
		}
		if d := time.Since(start); d > 0 {
			t.Fatalf("the acquire ended %v after Close, want at once", d)
		}
	})
}

// R-LOCK-6, R-TERM-7: ReleaseAsync ends the term at once and reports the
// backend's answer on its channel; a release still in flight frees
// nothing once the name was won again, and a second ReleaseAsync is a
// no-op.
func TestLockReleaseAsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		c := newClient(t, conn)
		ctx := context.Background()
		l := c.Lock("l")
		lt, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The release below waits half its call deadline (the renew
		// interval, a second) on its way.
		conn.Delay(500 * time.Millisecond)
		done := lt.ReleaseAsync()
		synctest.Wait() // the release is in its delay
		if lt.Valid() || lt.Reason() != simba.Stopped {
			t.Fatalf("after ReleaseAsync: valid %v, reason %v", lt.Valid(), lt.Reason())
		}
		if _, ok := <-lt.ReleaseAsync(); ok {
			t.Fatal("a second ReleaseAsync sent a value")
		}
		conn.Delay(0)
		again, err := l.Acquire(ctx) // won while the release is in flight
		if err != nil {
			t.Fatal(err)
		}
		if again.Token() <= lt.Token() {
			t.Fatalf("token %d after %d", again.Token(), lt.Token())
		}
		if err, ok := <-done; !ok || err != nil {
			t.Fatalf("release answer: %v (sent %v), want nil", err, ok)
		}
		if _, ok := <-done; ok {
			t.Fatal("the channel sent twice")
		}
		if _, tok, ok := s.Owner("l"); !ok || tok != again.Token() || !again.Valid() {
			t.Fatalf("after the late release: owner token %d (%v), want %d held", tok, ok, again.Token())
		}
		if err := again.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := s.Owner("l"); ok {
			t.Fatal("still owned after Release")
		}

		// The backend's error reaches the channel.
		lt, err = l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		conn.Fail(boom)
		if err := <-lt.ReleaseAsync(); !errors.Is(err, boom) {
			t.Fatalf("release answer %v, want one wrapping the backend's error", err)
		}
		conn.Fail(nil)
	})
}

// cutNext is a memory connection whose Acquire, while cut is set, waits
// for its ctx to end and fails with its error.
type cutNext struct {
	*memory.Conn
	cut atomic.Bool
}

func (b *cutNext) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	if b.cut.Load() {
		<-ctx.Done()
		return simba.AcquireResult{}, ctx.Err()
	}
	return b.Conn.Acquire(ctx, s, name)
}

// R-CAND-2: a waiter that gives up while its attempt is in flight leaves
// the waiters behind it watching for the release, so they take the lock
// as soon as it is released rather than at their next regular attempt.
// The attempt it gave up is not a backend error.
func TestGivenUpAttemptKeepsReleaseWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		ctx := context.Background()
		held, err := newClient(t, s.Connect()).Lock("l").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b := &cutNext{Conn: s.Connect()}
		var backendErrors atomic.Int32
		l := newClient(t, b, simba.WithEventListener(func(_ context.Context, e simba.Event) {
			if e.Kind == simba.EventBackendError {
				backendErrors.Add(1)
			}
		})).Lock("l")
		won := make(chan time.Time, 1)
		go func() {
			lt, err := l.Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			won <- time.Now()
			_ = lt.Release(ctx)
		}()
		synctest.Wait() // the first waiter lost and watches for the release
		b.cut.Store(true)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := l.Acquire(short); err == nil {
			t.Fatal("the second waiter won a held lock")
		}
		b.cut.Store(false)
		synctest.Wait()
		released := time.Now()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if d := (<-won).Sub(released); d > 0 {
			t.Fatalf("the first waiter won %v after the release, want at once", d)
		}
		time.Sleep(time.Second)
		if n := backendErrors.Load(); n != 0 {
			t.Fatalf("%d backend errors reported for an attempt its caller gave up", n)
		}
	})
}

// R-LOCK-1, R-LOCK-3: a timeout of zero, or one that passed before the
// call, makes one attempt, as TryAcquire does: the lock is won when it is
// free, and the call times out when it is held. A cancelled ctx makes none.
func TestAcquireWithAPassedDeadlineMakesOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn1, conn2 := s.Connect(), s.Connect()
		c1, c2 := newClient(t, conn1), newClient(t, conn2)
		synctest.Wait() // both sessions open

		zero, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		lt, err := c1.Lock("zero").Acquire(zero)
		if err != nil {
			t.Fatalf("Acquire of a free lock with a zero timeout: %v, want the term", err)
		}
		if !lt.Valid() || lt.Token() == 0 {
			t.Fatalf("term %v, want a valid one", lt.Term)
		}

		before := conn2.Calls()[memory.OpAcquire]
		start := time.Now()
		_, err = c2.Lock("zero").Acquire(zero)
		if !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire of a held lock with a zero timeout: %v, want ErrLockTimeout and DeadlineExceeded", err)
		}
		if n := conn2.Calls()[memory.OpAcquire] - before; n != 1 {
			t.Fatalf("%d backend attempts, want 1", n)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("the attempt took %v of fake time, want 0", d)
		}
		if _, err := c1.Lock("zero").Acquire(zero); !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with a zero timeout of a lock this client holds: %v, want ErrLockTimeout", err)
		}
		if err := lt.Release(context.Background()); err != nil {
			t.Fatal(err)
		}

		cancelled, cancelNow := context.WithCancel(context.Background())
		cancelNow()
		before = conn2.Calls()[memory.OpAcquire]
		if _, err := c2.Lock("zero").Acquire(cancelled); !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with a cancelled ctx: %v, want ErrLockTimeout and Canceled", err)
		}
		if n := conn2.Calls()[memory.OpAcquire] - before; n != 0 {
			t.Fatalf("a cancelled Acquire made %d backend attempts, want none", n)
		}
		synctest.Wait()
		if id, _, ok := s.Owner("zero"); ok && id != "" {
			t.Fatal("the lock is held after the cancelled Acquire")
		}
	})
}

// A zero timeout on an unreachable backend waits for the answer to its one
// attempt as TryAcquire does, one lease duration, and reports an outage.
func TestAcquireWithAPassedDeadlineOnAnUnreachableBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memory.New().Connect()
		conn.Stall()
		c := newClient(t, conn)
		zero, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		start := time.Now()
		_, err := c.Lock("zero").Acquire(zero)
		if !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, simba.ErrBackendUnavailable) {
			t.Fatalf("Acquire with a zero timeout, backend stalled: %v, want ErrLockTimeout, DeadlineExceeded and ErrBackendUnavailable", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("gave up after %v, want one lease duration", d)
		}
	})
}

// R-LOCK-3: TryAcquire with a deadline that passed before the call, a
// timeout of zero, still makes its one attempt: it wins a free lock, and
// a held one fails with ErrLockHeld after one backend call.
func TestTryAcquireWithAPassedDeadlineMakesOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn1, conn2 := s.Connect(), s.Connect()
		c1, c2 := newClient(t, conn1), newClient(t, conn2)
		synctest.Wait()

		zero, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		lt, err := c1.Lock("try-zero").TryAcquire(zero)
		if err != nil {
			t.Fatalf("TryAcquire of a free lock with a zero timeout: %v, want the term", err)
		}
		if !lt.Valid() {
			t.Fatal("the term won with a zero timeout is not valid")
		}
		before := conn2.Calls()[memory.OpAcquire]
		if _, err := c2.Lock("try-zero").TryAcquire(zero); !errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("TryAcquire of a held lock with a zero timeout: %v, want ErrLockHeld", err)
		}
		if n := conn2.Calls()[memory.OpAcquire] - before; n != 1 {
			t.Fatalf("%d backend attempts, want 1", n)
		}
		cancelled, cancelNow := context.WithCancel(context.Background())
		cancelNow()
		before = conn2.Calls()[memory.OpAcquire]
		if _, err := c2.Lock("try-zero").TryAcquire(cancelled); !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, context.Canceled) {
			t.Fatalf("TryAcquire with a cancelled ctx: %v, want ErrLockTimeout and Canceled", err)
		}
		if n := conn2.Calls()[memory.OpAcquire] - before; n != 0 {
			t.Fatalf("a cancelled TryAcquire made %d backend attempts, want none", n)
		}
	})
}

// panickyAcquire is a backend whose Acquire of one name panics on the
// caller's goroutine.
type panickyAcquire struct {
	simba.Backend
	name string
}

func (b *panickyAcquire) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	if name == b.name {
		panic("backend failure")
	}
	return b.Backend.Acquire(ctx, s, name)
}

// An Acquire that a backend's panic ended, recovered by its caller,
// leaves nothing that a later call of the same goroutine shares: that
// call waits for its own lock, and Close ends both cleanly.
func TestLockAcquireAfterABackendPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, &panickyAcquire{Backend: s.Connect(), name: "p"})
		other := newClient(t, s.Connect())
		if _, err := other.Lock("q").Acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		synctest.Wait() // the session is open: the attempt runs on the caller's goroutine
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the backend's panic did not reach the caller")
				}
			}()
			_, _ = c.Lock("p").Acquire(ctx)
		}()
		for range 3 {
			done := make(chan error, 1)
			go func() {
				_, err := c.Lock("q").Acquire(ctx)
				done <- err
			}()
			synctest.Wait()
			closed := make(chan error, 1)
			go func() { closed <- c.Close(context.Background()) }()
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := <-done; !errors.Is(err, simba.ErrClosed) {
				t.Fatalf("the waiting Acquire after Close = %v, want ErrClosed", err)
			}
			c = newClient(t, &panickyAcquire{Backend: s.Connect(), name: "p"})
			synctest.Wait()
			func() {
				defer func() { _ = recover() }()
				_, _ = c.Lock("p").Acquire(ctx)
			}()
		}
	})
}
