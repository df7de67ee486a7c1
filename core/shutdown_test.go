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

// R-SES-4: Close with a ctx that is already done, as after Ctrl-C with a
// signal.NotifyContext ctx, still closes the session, so the backend frees
// every lease at once rather than at the session's expiry.
func TestCloseWithADoneCtxStillClosesTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		if _, err := c.Lock("held").Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.Close(ctx)
		if ids := s.Sessions(); len(ids) != 0 {
			t.Fatalf("sessions after Close with a done ctx: %v, want none", ids)
		}
		if _, _, held := s.Owner("held"); held {
			t.Fatal("the lock is still held after Close")
		}
	})
}

// Close on a backend that does not answer gives the session's close call
// one renew interval, whatever its ctx: a shorter ctx does not cut it
// short, a longer one does not make it longer (R-DL-2).
func TestCloseOnAFrozenBackendGetsOneRenewInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memory.New().Connect()
		c := newClient(t, conn)
		synctest.Wait() // the session is open
		conn.Stall()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := c.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want an error matching context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("Close returned after %v, want the renew interval, 1s", d)
		}

		conn2 := memory.New().Connect()
		c2 := newClient(t, conn2)
		synctest.Wait()
		conn2.Stall()
		long, cancelLong := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancelLong()
		start = time.Now()
		if err := c2.Close(long); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want an error matching context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("Close returned after %v, want the renew interval, 1s", d)
		}
	})
}

// R-HO-1, Close: leader work that ignores its ctx does not hold Close past
// its ctx. Close returns ctx's error; the handover goes on in the
// background, and the session is closed only once the work has exited.
func TestCloseIsBoundedByItsCtxWhileWorkRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		started, exit := make(chan struct{}), make(chan struct{})
		returned := make(chan error, 1)
		go func() {
			returned <- c.Election("work").RunWhileLeader(context.Background(), func(context.Context, *simba.Term) error {
				close(started)
				<-exit // ignores its ctx
				return nil
			})
		}()
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := c.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want an error matching context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Fatalf("Close returned after %v, want the 100ms of its ctx", d)
		}
		time.Sleep(time.Second)
		if _, _, held := s.Owner("work"); !held {
			t.Fatal("the lease was released while the work still ran")
		}
		close(exit)
		synctest.Wait()
		if ids := s.Sessions(); len(ids) != 0 {
			t.Fatalf("sessions once the work exited: %v, want none", ids)
		}
		if err := <-returned; !errors.Is(err, simba.ErrClosed) {
			t.Fatalf("RunWhileLeader = %v, want ErrClosed", err)
		}
	})
}

// Stop and StepDown on a backend that does not answer return when their
// ctx ends; the release and the OnRevoked finish in the background.
func TestStopOnAFrozenBackendIsBoundedByItsCtx(t *testing.T) {
	for _, stepDown := range []bool{false, true} {
		name := "Stop"
		if stepDown {
			name = "StepDown"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				conn := memory.New().Connect()
				c := newClient(t, conn)
				r := newRecorder()
				el := c.Election("frozen")
				if err := el.Start(r); err != nil {
					t.Fatal(err)
				}
				r.elected(t, time.Second)
				conn.Stall()
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				start := time.Now()
				var err error
				if stepDown {
					err = el.StepDown(ctx, time.Minute)
				} else {
					err = el.Stop(ctx)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s = %v, want an error matching context.DeadlineExceeded", name, err)
				}
				if d := time.Since(start); d != 100*time.Millisecond {
					t.Fatalf("%s returned after %v, want the 100ms of its ctx", name, d)
				}
				want := simba.Stopped
				if stepDown {
					want = simba.SteppedDown
				}
				r.revoked(t, 2*time.Second, want) // once the release gave up
				conn.Unstall()
				if stepDown {
					_ = el.Stop(context.Background())
				}
			})
		})
	}
}

// blockingRevoked is a listener whose first OnRevoked waits for a signal
// and then stops its own election from inside the callback.
type blockingRevoked struct {
	*recorder
	el      *simba.Election
	inside  chan struct{}
	proceed chan struct{}
	once    sync.Once
	stopErr chan error
}

func (b *blockingRevoked) OnRevoked(ctx context.Context, t *simba.Term, reason simba.RevokeReason) {
	b.recorder.OnRevoked(ctx, t, reason)
	b.once.Do(func() {
		close(b.inside)
		<-b.proceed
		b.stopErr <- b.el.Stop(ctx)
	})
}

// R-CB-1: a Stop called from inside a callback ends the callbacks: an
// OnElected of a new term queued before it is not delivered, nor the
// OnRevoked of that term.
func TestStopFromACallbackDropsAQueuedOnElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		el := c.Election("cb")
		l := &blockingRevoked{recorder: newRecorder(), el: el, inside: make(chan struct{}),
			proceed: make(chan struct{}), stopErr: make(chan error, 1)}
		if err := el.Start(l); err != nil {
			t.Fatal(err)
		}
		first := l.elected(t, time.Second)
		s.ExpireSession(first.Session())
		<-l.inside // OnRevoked of the first term runs, and waits
		l.revoked(t, time.Second, simba.SessionExpired)
		// A new session opens and wins a second term, whose OnElected
		// waits behind the running OnRevoked.
		for el.Term() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		close(l.proceed)
		if err := <-l.stopErr; err != nil {
			t.Fatalf("Stop from the callback: %v", err)
		}
		l.quiet(t, 10*time.Second)
	})
}

// Close waits for the last callbacks, the OnRevoked of a Stop or StepDown
// that returned on its ctx included: queued behind a slow OnElected, with
// the release still in flight or already answered, it runs before Close
// returns (R-CB-1, R-CB-3).
func TestCloseWaitsForTheOnRevokedOfAStopThatTimedOut(t *testing.T) {
	for _, tt := range []struct {
		name         string
		stepDown     bool
		releaseDelay time.Duration
	}{
		{name: "Stop, release answered", releaseDelay: 0},
		{name: "Stop, release in flight", releaseDelay: 500 * time.Millisecond},
		{name: "StepDown, release answered", stepDown: true, releaseDelay: 0},
		{name: "StepDown, release in flight", stepDown: true, releaseDelay: 500 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				conn := memory.New().Connect()
				c := newClient(t, conn)
				rec := newRecorder()
				slow := simba.ListenerFuncs{
					Elected: func(ctx context.Context, term *simba.Term) {
						rec.OnElected(ctx, term)
						time.Sleep(time.Second) // a slow callback, past the Stop's ctx
					},
					Revoked: rec.OnRevoked,
				}
				el := c.Election("x")
				if err := el.Start(slow); err != nil {
					t.Fatal(err)
				}
				rec.elected(t, 5*time.Second)
				conn.Delay(tt.releaseDelay)
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				end := el.Stop
				if tt.stepDown {
					end = func(ctx context.Context) error { return el.StepDown(ctx, time.Minute) }
				}
				if err := end(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Stop or StepDown behind a slow OnElected = %v, want the handover to go on in the background", err)
				}
				conn.Delay(0)
				if err := c.Close(context.Background()); err != nil {
					t.Fatalf("Close: %v", err)
				}
				closed := time.Now()
				select {
				case got := <-rec.ch:
					if got.elected || got.at.After(closed) {
						t.Fatalf("callback elected=%v %v came %v after Close returned, want OnRevoked before",
							got.elected, got.term, got.at.Sub(closed))
					}
				default:
					got := rec.next(t, 5*time.Second)
					t.Fatalf("callback elected=%v %v reason %v came %v after Close returned",
						got.elected, got.term, got.reason, got.at.Sub(closed))
				}
			})
		})
	}
}

// Beside another election, Close still waits for the OnRevoked of a
// handover a Stop left running: the handover's dispatcher, idle until that
// OnRevoked is queued, is dropped from the ended runs the client keeps
// when another run ends (here, Close ending the other election's run).
func TestCloseWaitsForTheOnRevokedOfAHandoverBesideAnotherElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memory.New().Connect()
		c := newClient(t, conn)
		rec := newRecorder()
		var revokedAt atomic.Int64
		a := c.Election("a")
		if err := a.Start(simba.ListenerFuncs{
			Elected: rec.OnElected,
			Revoked: func(context.Context, *simba.Term, simba.RevokeReason) {
				time.Sleep(time.Second) // a slow OnRevoked
				revokedAt.Store(time.Now().UnixNano())
			},
		}); err != nil {
			t.Fatal(err)
		}
		rec.elected(t, 5*time.Second)
		if err := c.Election("b").Start(newRecorder()); err != nil {
			t.Fatal(err)
		}
		conn.Delay(500 * time.Millisecond) // the release of a's term is still in flight at Close
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := a.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop with the release in flight = %v, want the handover to go on in the background", err)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		closed := time.Now()
		if at := revokedAt.Load(); at == 0 {
			time.Sleep(2 * time.Second)
			t.Fatalf("the OnRevoked of a's handover ended %v after Close returned", time.Unix(0, revokedAt.Load()).Sub(closed))
		}
	})
}
