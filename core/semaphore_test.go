package simba_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// acquirePermits takes k permits of sem on c and fails on an error.
func acquirePermits(t *testing.T, sem *simba.Semaphore, k int) []*simba.LockTerm {
	t.Helper()
	var terms []*simba.LockTerm
	for range k {
		lt, err := sem.Acquire(t.Context())
		if err != nil {
			t.Fatalf("Acquire of %s: %v", sem.Name(), err)
		}
		terms = append(terms, lt)
	}
	return terms
}

// R-SEM-1: at most n terms are valid at once; a waiter gets the permit a
// holder releases, with a higher token than every earlier permit.
func TestSemaphoreAtMostN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		a, b := newClient(t, s.Connect()), newClient(t, s.Connect())
		held := append(acquirePermits(t, a.Semaphore("jobs", 3), 2), acquirePermits(t, b.Semaphore("jobs", 3), 1)...)
		names := map[string]bool{}
		var last uint64
		for _, lt := range held {
			if lt.Token() <= last || !lt.Valid() || names[lt.Name()] {
				t.Fatalf("permit %s token %d valid %v after token %d", lt.Name(), lt.Token(), lt.Valid(), last)
			}
			names[lt.Name()], last = true, lt.Token()
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := b.Semaphore("jobs", 3).TryAcquire(ctx); !errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("TryAcquire of a full semaphore: %v, want ErrLockHeld", err)
		}
		got := make(chan *simba.LockTerm, 1)
		go func() {
			lt, err := b.Semaphore("jobs", 3).Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- lt
		}()
		time.Sleep(2 * time.Second)
		select {
		case lt := <-got:
			t.Fatalf("a fourth permit %s was granted while three are held", lt.Name())
		default:
		}
		freed := held[1]
		if err := freed.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		lt := <-got
		if lt == nil {
			return
		}
		if lt.Token() <= last || !lt.Valid() {
			t.Fatalf("waiter's permit %s token %d, want valid above %d", lt.Name(), lt.Token(), last)
		}
		if d := time.Since(start); d > 0 {
			t.Fatalf("the waiter got the released permit after %v, want at once (release broadcast)", d)
		}
		for _, h := range append(held, lt) {
			_ = h.Release(t.Context())
		}
	})
}

// R-SEM-2: a client asking with another number of permits while permits
// granted under the first are held fails at once with ErrPermitsMismatch,
// whether the holder is another client or itself; once none is held, the
// new number is accepted.
func TestSemaphorePermitsMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		a, b := newClient(t, s.Connect()), newClient(t, s.Connect())
		held := acquirePermits(t, a.Semaphore("pool", 2), 1)[0]
		for _, c := range []*simba.Client{a, b} {
			start := time.Now()
			_, err := c.Semaphore("pool", 3).Acquire(t.Context())
			if !errors.Is(err, simba.ErrPermitsMismatch) {
				t.Fatalf("Acquire with 3 permits while 2 are in use: %v, want ErrPermitsMismatch", err)
			}
			if time.Since(start) != 0 {
				t.Fatalf("the mismatch took %v, want no wait", time.Since(start))
			}
		}
		if err := held.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		lt := acquirePermits(t, b.Semaphore("pool", 3), 1)[0]
		if lt.Token() <= held.Token() {
			t.Fatalf("token %d after the number changed, want above %d", lt.Token(), held.Token())
		}
		_ = lt.Release(t.Context())
	})
}

// R-SEM-1, R-SEM-3: many goroutines of several clients share n permits; the
// recorded terms never overlap more than n at once.
func TestSemaphoreConcurrentHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, workers, rounds = 3, 8, 5
		s := memory.New()
		clients := []*simba.Client{newClient(t, s.Connect()), newClient(t, s.Connect())}
		var mu sync.Mutex
		inside, most := 0, 0
		tokens := map[uint64]bool{}
		var wg sync.WaitGroup
		for w := range workers {
			sem := clients[w%len(clients)].Semaphore("work", n)
			wg.Go(func() {
				for range rounds {
					lt, err := sem.Acquire(t.Context())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					inside++
					most = max(most, inside)
					if tokens[lt.Token()] {
						t.Errorf("token %d granted twice", lt.Token())
					}
					tokens[lt.Token()] = true
					mu.Unlock()
					time.Sleep(100 * time.Millisecond)
					mu.Lock()
					inside--
					mu.Unlock()
					if err := lt.Release(t.Context()); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if most != n {
			t.Fatalf("at most %d holders at once, want exactly %d", most, n)
		}
		if len(tokens) != workers*rounds {
			t.Fatalf("%d distinct tokens, want %d", len(tokens), workers*rounds)
		}
	})
}

// R-LOCK-2 for permits: a cancelled Acquire leaves no permit held, and a
// timeout reports ErrLockTimeout with the deadline.
func TestSemaphoreTimeoutAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		held := acquirePermits(t, c.Semaphore("one", 1), 1)[0]
		ctx, cancel := context.WithTimeout(t.Context(), 7*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Semaphore("one", 1).Acquire(ctx)
		if !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire of a held permit: %v, want ErrLockTimeout and DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 7*time.Second {
			t.Fatalf("timed out after %v, want 7s", d)
		}
		past, cancelPast := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancelPast()
		if _, err := c.Semaphore("one", 1).Acquire(past); !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("Acquire with a passed deadline: %v, want ErrLockTimeout and ErrLockHeld", err)
		}
		cctx, stop := context.WithCancel(t.Context())
		go func() {
			time.Sleep(time.Second)
			stop()
		}()
		if _, err := c.Semaphore("one", 1).Acquire(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v, want context.Canceled", err)
		}
		_ = held.Release(t.Context())
		synctest.Wait()
		if id, _, ok := s.Owner(simba.PermitName("one", 0)); ok {
			t.Fatalf("the permit is held by %s after its release and a cancelled wait", id)
		}
	})
}

// Bad arguments are refused before any backend call.
func TestSemaphoreBadArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		long := string(make([]byte, simba.MaxNameLength-1))
		for i := range long {
			long = long[:i] + "a" + long[i+1:]
		}
		for _, tc := range []struct {
			name    string
			permits int
		}{{"jobs", 0}, {"jobs", -2}, {"jobs", simba.MaxPermits + 1}, {"", 1}, {"a/b", 2}, {long, 10}} {
			before := s.Calls()[memory.OpAcquirePermit]
			_, err := c.Semaphore(tc.name, tc.permits).Acquire(t.Context())
			var ne *simba.NameError
			if !errors.Is(err, simba.ErrInvalidArgument) && !errors.As(err, &ne) {
				t.Errorf("Semaphore(%q, %d).Acquire: %v, want ErrInvalidArgument or a *NameError", tc.name, tc.permits, err)
			}
			if s.Calls()[memory.OpAcquirePermit] != before {
				t.Errorf("Semaphore(%q, %d): the backend was called", tc.name, tc.permits)
			}
		}
		//nolint:staticcheck // a nil context is the bad input under test
		if _, err := c.Semaphore("jobs", 1).TryAcquire(nil); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("TryAcquire(nil): %v, want ErrInvalidArgument", err)
		}
		// A plain lock of a permit's lease name, while the permit is held.
		lt := acquirePermits(t, c.Semaphore("jobs", 1), 1)[0]
		if _, err := c.Lock(lt.Name()).TryAcquire(t.Context()); !errors.Is(err, simba.ErrNameInUse) {
			t.Errorf("Lock(%q) while it is held as a permit: %v, want ErrNameInUse", lt.Name(), err)
		}
		_ = lt.Release(t.Context())
	})
}

// A backend without PermitAcquirer makes Acquire fail with ErrNotSupported.
func TestSemaphoreNotSupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, lockOnly{memory.New()})
		if _, err := c.Semaphore("jobs", 2).Acquire(t.Context()); !errors.Is(err, simba.ErrNotSupported) {
			t.Fatalf("Acquire on a backend without permits: %v, want ErrNotSupported", err)
		}
	})
}

// lockOnly hides every capability of a backend beyond the SPI.
type lockOnly struct{ simba.Backend }

// An uncontended permit costs one backend call; a semaphore of more
// permits than one Acquire queues for still hands a released permit to a
// waiter within a lease duration.
func TestSemaphoreCostAndManyPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		before := s.Calls()[memory.OpAcquirePermit]
		lt := acquirePermits(t, c.Semaphore("one", 4), 1)[0]
		if calls := s.Calls()[memory.OpAcquirePermit] - before; calls != 1 {
			t.Fatalf("an uncontended Acquire made %d backend calls, want 1", calls)
		}
		_ = lt.Release(t.Context())

		const n = 20
		held := acquirePermits(t, c.Semaphore("many", n), n)
		got := make(chan *simba.LockTerm, 1)
		go func() {
			lt, err := newClient(t, s.Connect()).Semaphore("many", n).Acquire(t.Context())
			if err != nil {
				t.Error(err)
			}
			got <- lt
		}()
		time.Sleep(time.Second)
		for _, h := range held[n-3:] {
			_ = h.Release(t.Context())
		}
		start := time.Now()
		lt = <-got
		if d := time.Since(start); lt == nil || d > testConfig().LeaseDuration {
			t.Fatalf("the waiter of %d permits got a released one after %v, want within a lease duration", n, d)
		}
		for _, h := range append(held[:n-3], lt) {
			_ = h.Release(t.Context())
		}
	})
}
