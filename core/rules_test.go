package simba_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// R-TERM-1..5: each win is a new term; tokens grow; validity is a pure
// function of the clock; an ended term stays ended; EnsureValid.
func TestTermValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		c := newClient(t, conn)
		r := newRecorder()
		el := c.Election("e")
		_ = el.Start(r)
		t1 := r.elected(t, time.Second)
		if !t1.Valid() || t1.Token() == 0 || t1.Name() != "e" || t1.Reason() != simba.NotRevoked {
			t.Fatalf("fresh term %v valid=%v reason=%v", t1, t1.Valid(), t1.Reason())
		}
		if err := t1.EnsureValid(2 * time.Second); err != nil {
			t.Fatalf("EnsureValid(2s) with 3s left: %v", err)
		}
		if err := t1.EnsureValid(3 * time.Second); !errors.Is(err, simba.ErrTermExpired) {
			t.Fatalf("EnsureValid(3s) with exactly 3s left: %v, want ErrTermExpired", err)
		}
		// A pause: the connection stalls and the term turns invalid by the
		// clock alone, with no engine action needed.
		conn.Stall()
		time.Sleep(3 * time.Second)
		if t1.Valid() || t1.Remaining() != 0 {
			t.Fatalf("term valid=%v remaining=%v at its deadline", t1.Valid(), t1.Remaining())
		}
		r.revoked(t, time.Second, simba.DeadlinePassed)
		conn.Unstall()
		t2 := r.elected(t, 5*time.Second)
		if t2 == t1 || t2.Token() <= t1.Token() {
			t.Fatalf("second win %v after %v", t2, t1)
		}
		if t1.Valid() {
			t.Fatal("ended term valid again after re-election (R-TERM-4)")
		}
		if err := t1.EnsureValid(0); !errors.Is(err, simba.ErrTermExpired) {
			t.Fatalf("EnsureValid on an ended term: %v", err)
		}
		select {
		case <-t1.Done():
		default:
			t.Fatal("Done not closed on an ended term")
		}
		if cause := context.Cause(t1.Context()); !errors.Is(cause, simba.ErrTermExpired) || !strings.Contains(cause.Error(), "DEADLINE_PASSED") {
			t.Fatalf("context cause %v", cause)
		}
	})
}

// R-TERM-5: once the local deadline has passed, EnsureValid fails whatever
// minRemaining, a negative one included, even before the engine has
// revoked the term (here its keep-alive hangs past the deadline).
func TestEnsureValidFailsAnExpiredTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &hangingKeepAlive{Backend: memory.New().Connect(), release: make(chan struct{})}
		c := newClient(t, b)
		r := newRecorder()
		_ = c.Election("e").Start(r)
		term := r.elected(t, time.Second)
		b.hang.Store(true)
		time.Sleep(term.Remaining())
		if term.Reason() != simba.NotRevoked {
			t.Fatalf("term revoked (%v) at its deadline, want the engine still waiting for the keep-alive", term.Reason())
		}
		for _, give := range []time.Duration{0, -time.Nanosecond, -time.Hour} {
			if err := term.EnsureValid(give); !errors.Is(err, simba.ErrTermExpired) {
				t.Errorf("EnsureValid(%v) past the deadline = %v, want ErrTermExpired", give, err)
			}
		}
		close(b.release)
		r.revoked(t, time.Second, simba.DeadlinePassed)
	})
}

// hangingKeepAlive makes keep-alives, once hang is set, wait for release
// whatever their ctx, and then fail.
type hangingKeepAlive struct {
	simba.Backend
	hang    atomic.Bool
	release chan struct{}
}

func (b *hangingKeepAlive) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	if b.hang.Load() {
		<-b.release
		return simba.KeepAliveReply{}, errors.New("keep-alive hung")
	}
	return b.Backend.KeepAlive(ctx, s, req)
}

// R-TERM-6, R-TERM-7: revoked exactly once with the reason; revoked before
// released.
func TestRevokedBeforeReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		var term atomic.Pointer[simba.Term]
		seen := make(chan bool, 1)
		b := &releaseSpy{Backend: s.Connect(), onRelease: func() {
			seen <- term.Load().Valid()
		}}
		c := newClient(t, b)
		r := newRecorder()
		_ = c.Election("e").Start(r)
		term.Store(r.elected(t, time.Second))
		_ = c.Election("e").Stop(context.Background())
		if <-seen {
			t.Fatal("lease released while the term was still valid")
		}
		r.revoked(t, time.Second, simba.Stopped)
		r.quiet(t, 5*time.Second)
	})
}

type releaseSpy struct {
	simba.Backend
	onRelease func()
}

func (b *releaseSpy) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	b.onRelease()
	return b.Backend.Release(ctx, s, name, token)
}

// R-TERM-8: a keep-alive that no longer lists the lease revokes with
// TAKEN_OVER.
func TestTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		r := newRecorder()
		_ = c.Election("e").Start(r)
		t1 := r.elected(t, time.Second)
		tok := s.TakeOver("e")
		r.revoked(t, 1100*time.Millisecond, simba.TakenOver)
		if t1.Valid() || tok <= t1.Token() {
			t.Fatalf("valid=%v, take-over token %d after %d", t1.Valid(), tok, t1.Token())
		}
	})
}

// R-TERM-8: a keep-alive reply that reports a lease lost revokes the term
// it checked, even one won at the very instant the keep-alive was sent:
// the request carried its token, so the backend checked that term. The
// acquire reply is made to land at a keep-alive's instant, and the lease
// is taken over by the first keep-alive that carries the term; which of
// the two the engine sees first is up to the scheduler, so the case is
// run several times.
func TestTakenOverAtTheKeepAliveInstant(t *testing.T) {
	for i := range 10 {
		synctest.Test(t, func(t *testing.T) {
			s := memory.New()
			b := &takeOverOnKeepAlive{Backend: s.Connect(), srv: s, name: "e", tookOver: make(chan struct{})}
			c := newClient(t, b)
			awaitLive(t, c)
			time.Sleep(1500 * time.Millisecond) // past the first keep-alive
			r := newRecorder()
			if err := c.Election("e").Start(r); err != nil {
				t.Fatal(err)
			}
			term := r.elected(t, 2*time.Second)
			select {
			case <-b.tookOver:
			case <-time.After(3 * time.Second):
				t.Fatal("no keep-alive carried the term")
			}
			synctest.Wait() // the keep-alive reply is applied
			if term.Valid() {
				t.Fatalf("run %d: %v won at the keep-alive instant is still valid after a reply reported it lost", i, term)
			}
			r.revoked(t, time.Second, simba.TakenOver)
		})
	}
}

// takeOverOnKeepAlive delays the acquire of name to the instant of the
// next keep-alive, and hands the lease to another session during the
// first keep-alive whose request carries it, so that its reply reports
// the lease lost.
type takeOverOnKeepAlive struct {
	simba.Backend
	srv      *memory.Server
	name     string
	mu       sync.Mutex
	lastKA   time.Time
	done     bool
	tookOver chan struct{}
}

func (b *takeOverOnKeepAlive) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	if name == b.name {
		b.mu.Lock()
		at := b.lastKA.Add(time.Second) // the next keep-alive: testConfig renews every second
		b.mu.Unlock()
		time.Sleep(time.Until(at))
	}
	return b.Backend.Acquire(ctx, s, name)
}

func (b *takeOverOnKeepAlive) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	b.mu.Lock()
	b.lastKA = time.Now()
	_, carried := req.Held[b.name]
	takeOver := carried && !b.done
	b.done = b.done || carried
	b.mu.Unlock()
	if takeOver {
		b.srv.TakeOver(b.name)
		defer close(b.tookOver)
	}
	return b.Backend.KeepAlive(ctx, s, req)
}

// R-CAND-1: a candidate attempts every renewInterval/2 plus jitter in
// [0, retryJitter).
func TestCandidateAttemptPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		s.TakeOver("e")
		conn := s.Connect()
		rec := &acquireTimes{Backend: conn}
		cfg := testConfig()
		cfg.RetryJitter = 200 * time.Millisecond
		c := newClient(t, rec, simba.WithConfig(cfg))
		_ = c.Election("e").Start(newRecorder())
		time.Sleep(20 * time.Second)
		at := rec.times()
		if len(at) < 20 {
			t.Fatalf("%d attempts in 20s", len(at))
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < 500*time.Millisecond || gap >= 700*time.Millisecond {
				t.Fatalf("attempt gap %v, want in [500ms, 700ms)", gap)
			}
		}
	})
}

type acquireTimes struct {
	simba.Backend
	mu       sync.Mutex
	at       []time.Time
	inFlight atomic.Int32
	maxIn    atomic.Int32
	hold     chan struct{} // when set, each acquire waits for it
}

func (b *acquireTimes) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	b.mu.Lock()
	b.at = append(b.at, time.Now())
	b.mu.Unlock()
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		m := b.maxIn.Load()
		if n <= m || b.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	if b.hold != nil {
		select {
		case <-b.hold:
		case <-ctx.Done():
		}
	}
	return b.Backend.Acquire(ctx, s, name)
}

func (b *acquireTimes) times() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.at...)
}

// attemptInFlight starts election e on a client whose acquire waits for
// rec.hold, and returns once that acquire is in flight. Call it in a
// synctest bubble.
func attemptInFlight(t *testing.T) (*memory.Server, *acquireTimes, *simba.Election) {
	s := memory.New()
	rec := &acquireTimes{Backend: s.Connect(), hold: make(chan struct{})}
	el := newClient(t, rec).Election("e")
	_ = el.Start(newRecorder())
	synctest.Wait()
	return s, rec, el
}

// R-CAND-3, R-CAND-5: at most one acquire in flight; a late reply to an
// abandoned attempt releases what it won.
func TestAbandonedAttemptReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, rec, el := attemptInFlight(t)
		// Stop abandons the attempt in flight and waits for it; a
		// cancelled ctx ends the waiting, not the stop.
		gaveUp, cancel := context.WithCancel(context.Background())
		cancel()
		if err := el.Stop(gaveUp); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stop with an attempt in flight and a cancelled ctx: %v", err)
		}
		_ = el.Start(newRecorder()) // must not send a second acquire meanwhile
		if err := el.Stop(gaveUp); !errors.Is(err, context.Canceled) {
			t.Fatalf("second Stop: %v", err)
		}
		synctest.Wait()
		if n := len(rec.times()); n != 1 {
			t.Fatalf("%d acquires sent while one was in flight", n)
		}
		close(rec.hold)
		synctest.Wait()
		if _, _, ok := s.Owner("e"); ok {
			t.Fatal("the late win of an abandoned attempt was not released")
		}
		if rec.maxIn.Load() != 1 {
			t.Fatalf("%d acquires in flight at once", rec.maxIn.Load())
		}
	})
}

// Stop waits for an acquire in flight and gives back what it won: the
// name is free when Stop returns, and a Stop whose ctx ends first says so.
func TestStopWaitsForAttemptInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, rec, el := attemptInFlight(t)
		stopped := make(chan error, 1)
		go func() { stopped <- el.Stop(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) while the acquire was in flight", err)
		default:
		}
		close(rec.hold) // the acquire wins now
		if err := <-stopped; err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if _, tok, ok := s.Owner("e"); ok {
			t.Fatalf("e held (token %d) when Stop returned", tok)
		}
	})
}

// R-CAND-4: a reply received after the local deadline is not adopted.
func TestReplyAfterDeadlineNotAdopted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		c := newClient(t, conn)
		synctest.Wait()
		// Every call now takes 900ms to reach the server: the keep-alives at
		// 1s and 2s still fit in their 1s timeout, until the session's
		// deadline (3s after the last send) no longer leaves room.
		conn.DropReplies(true)
		r := newRecorder()
		_ = c.Election("e").Start(r)
		time.Sleep(2500 * time.Millisecond)
		// The acquire reached the server and won, its reply was lost: no term.
		if len(r.calls) != 0 {
			t.Fatalf("adopted a term whose reply never arrived: %+v", r.calls[0])
		}
		conn.DropReplies(false)
		term := r.elected(t, 10*time.Second)
		if !term.Valid() {
			t.Fatal("no valid term once replies flow again")
		}
	})
}

// R-HO-4, R-CB-3: StepDown keeps the election started, waits the cooldown,
// and returns after the last OnRevoked ran.
func TestStepDownCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		r := newRecorder()
		el := c.Election("e")
		_ = el.Start(r)
		t1 := r.elected(t, time.Second)
		start := time.Now()
		if err := el.StepDown(context.Background(), 4*time.Second); err != nil {
			t.Fatal(err)
		}
		if len(r.ch) != 1 {
			t.Fatal("StepDown returned before OnRevoked ran")
		}
		r.revoked(t, time.Second, simba.SteppedDown)
		t2 := r.elected(t, 10*time.Second)
		if d := time.Since(start); d < 4*time.Second || t2.Token() <= t1.Token() {
			t.Fatalf("re-elected after %v (cooldown 4s), token %d after %d", d, t2.Token(), t1.Token())
		}
		if err := el.StepDown(context.Background(), -time.Second); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Fatalf("negative cooldown: %v", err)
		}
		if err := el.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.revoked(t, time.Second, simba.Stopped)
		r.quiet(t, 10*time.Second)
		if err := el.Stop(context.Background()); !errors.Is(err, simba.ErrNotStarted) {
			t.Fatalf("second Stop: %v", err)
		}
	})
}

// R-CB-1, R-CB-2: callbacks paired, serial, in order, through many terms.
func TestCallbacksPairedAndSerial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		var running, overlap atomic.Int32
		var mu sync.Mutex
		var seq []string
		l := simba.ListenerFuncs{
			Elected: func(_ context.Context, tm *simba.Term) {
				if running.Add(1) > 1 {
					overlap.Add(1)
				}
				time.Sleep(50 * time.Millisecond)
				mu.Lock()
				seq = append(seq, "E")
				mu.Unlock()
				running.Add(-1)
			},
			Revoked: func(_ context.Context, tm *simba.Term, _ simba.RevokeReason) {
				if running.Add(1) > 1 {
					overlap.Add(1)
				}
				mu.Lock()
				seq = append(seq, "R")
				mu.Unlock()
				running.Add(-1)
			},
		}
		el := c.Election("e")
		_ = el.Start(l)
		for range 5 {
			time.Sleep(100 * time.Millisecond)
			s.TakeOver("e")
			time.Sleep(1100 * time.Millisecond)
			_ = el.StepDown(context.Background(), 0)
		}
		_ = el.Stop(context.Background())
		mu.Lock()
		defer mu.Unlock()
		got := strings.Join(seq, "")
		if strings.Count(got, "ER") != len(got)/2 || len(got)%2 != 0 || len(got) == 0 {
			t.Fatalf("callback sequence %q is not paired", got)
		}
		if overlap.Load() != 0 {
			t.Fatal("callbacks overlapped")
		}
	})
}

// R-CB-4: starting an election twice fails.
func TestDoubleStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		if err := c.Election("e").Start(newRecorder()); err != nil {
			t.Fatal(err)
		}
		if err := c.Election("e").Start(newRecorder()); !errors.Is(err, simba.ErrAlreadyStarted) {
			t.Fatalf("second Start: %v", err)
		}
	})
}

// R-CB-5: Stop and Close called from a callback do not wait for it.
func TestBlockingCallsFromCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c, _ := simba.New(s.Connect(), simba.WithConfig(testConfig()))
		done := make(chan error, 2)
		el := c.Election("e")
		_ = el.Start(simba.ListenerFuncs{Elected: func(ctx context.Context, _ *simba.Term) {
			done <- el.Stop(ctx)
			done <- c.Close(ctx)
		}})
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// R-CB-6: an executor that rejects OnElected: the election steps down for
// one lease duration and the term's OnRevoked is not delivered.
func TestRejectedOnElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		ex := &rejectFirst{}
		c := newClient(t, s.Connect(), simba.WithCallbackExecutor(ex))
		r := newRecorder()
		_ = c.Election("e").Start(r)
		start := time.Now()
		t2 := r.elected(t, 10*time.Second)
		if d := time.Since(start); d < 3*time.Second {
			t.Fatalf("elected again after %v, want one lease duration (3s) of cooldown", d)
		}
		if len(r.calls) != 1 || t2.Token() != 2 {
			t.Fatalf("calls %d, token %d", len(r.calls), t2.Token())
		}
	})
}

type rejectFirst struct{ n atomic.Int32 }

func (e *rejectFirst) Execute(f func()) error {
	if e.n.Add(1) == 1 {
		return errors.New("busy")
	}
	go f()
	return nil
}

// R-OBS-1, R-OBS-2: snapshot and events.
func TestSnapshotAndEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		var mu sync.Mutex
		var kinds []simba.EventKind
		c := newClient(t, s.Connect(), simba.WithEventListener(func(_ context.Context, e simba.Event) {
			mu.Lock()
			kinds = append(kinds, e.Kind)
			mu.Unlock()
		}))
		r := newRecorder()
		_ = c.Election("a").Start(r)
		r.elected(t, time.Second)
		s.TakeOver("b")
		_ = c.Election("b").Start(newRecorder())
		synctest.Wait()
		snap := c.Snapshot()
		if snap.Session.Status != simba.StatusLive || snap.Session.ID == "" || snap.Session.Remaining != 3*time.Second {
			t.Fatalf("session %+v", snap.Session)
		}
		if len(snap.Leases) != 2 || snap.Leases[0].State != simba.StateHolding || snap.Leases[0].Token != 1 ||
			snap.Leases[1].State != simba.StateContending {
			t.Fatalf("leases %+v", snap.Leases)
		}
		_ = c.Election("a").Stop(context.Background())
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []simba.EventKind{simba.EventSessionOpened, simba.EventElected, simba.EventRevoked}
		if len(kinds) < 3 || kinds[0] != want[0] || kinds[1] != want[1] || kinds[len(kinds)-1] != want[2] {
			t.Fatalf("events %v", kinds)
		}
	})
}

// slowRelease delays every release by 100ms.
type slowRelease struct{ simba.Backend }

func (s slowRelease) Release(ctx context.Context, id simba.SessionID, n string, tok uint64) error {
	time.Sleep(100 * time.Millisecond)
	return s.Backend.Release(ctx, id, n, tok)
}

// R-CB-1, R-CB-2: a step-down with no cooldown and a slow release still
// delivers the old term's OnRevoked before the next term's OnElected.
func TestStepDownSlowReleaseKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, slowRelease{memory.New().Connect()})
		r := newRecorder()
		el := c.Election("e")
		_ = el.Start(r)
		t1 := r.elected(t, time.Second)
		if err := el.StepDown(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if got := r.revoked(t, time.Second, simba.SteppedDown); got != t1 {
			t.Fatalf("OnRevoked(%v), want the first term", got)
		}
		if t2 := r.elected(t, 5*time.Second); t2.Token() <= t1.Token() {
			t.Fatalf("second term %v", t2)
		}
	})
}

// R-CB-5: Client.Close from OnElected with the callback's ctx returns nil,
// also with an event listener.
func TestCloseFromCallbackWithEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := simba.New(memory.New().Connect(), simba.WithEventListener(func(context.Context, simba.Event) {}))
		errc := make(chan error, 1)
		_ = c.Election("report").Start(simba.ListenerFuncs{Elected: func(ctx context.Context, _ *simba.Term) { errc <- c.Close(ctx) }})
		if err := <-errc; err != nil {
			t.Fatalf("Close from a callback: %v", err)
		}
		synctest.Wait()
	})
}

// A panic in a listener callback is recovered and reported like a panic in
// leader work: OnElected panicking steps the election down from that term
// for one lease duration, and its OnRevoked is still delivered (R-CB-1); a
// panic in OnRevoked or in the event listener is reported, and later
// callbacks and events still arrive.
func TestListenerPanicsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		var mu sync.Mutex
		var kinds []simba.EventKind
		events := 0
		c := newClient(t, s.Connect(), simba.WithEventListener(func(_ context.Context, e simba.Event) {
			mu.Lock()
			kinds = append(kinds, e.Kind)
			events++
			n := events
			mu.Unlock()
			if n == 1 {
				panic("event listener")
			}
		}))
		r := newRecorder()
		var elected atomic.Int32
		l := simba.ListenerFuncs{
			Elected: func(ctx context.Context, term *simba.Term) {
				r.OnElected(ctx, term)
				if elected.Add(1) == 1 {
					panic("OnElected")
				}
			},
			Revoked: func(ctx context.Context, term *simba.Term, reason simba.RevokeReason) {
				r.OnRevoked(ctx, term, reason)
				panic("OnRevoked")
			},
		}
		el := c.Election("e")
		if err := el.Start(l); err != nil {
			t.Fatal(err)
		}
		t1 := r.elected(t, time.Second)
		start := time.Now()
		if got := r.revoked(t, time.Second, simba.SteppedDown); got != t1 {
			t.Fatalf("revoked %v, want %v", got, t1)
		}
		if _, _, held := s.Owner("e"); held {
			t.Fatal("lease held after OnElected panicked")
		}
		t2 := r.elected(t, 10*time.Second)
		if d := time.Since(start); d < 3*time.Second || t2.Token() <= t1.Token() {
			t.Fatalf("re-elected %v after %v, want after one lease duration", t2, d)
		}
		if err := el.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.revoked(t, time.Second, simba.Stopped)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		panics := 0
		for _, k := range kinds {
			if k == simba.EventListenerPanicked {
				panics++
			}
		}
		if panics != 3 { // OnElected once, OnRevoked twice
			t.Fatalf("%d ListenerPanicked events in %v, want 3", panics, kinds)
		}
	})
}
