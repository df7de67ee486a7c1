package simba_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// leadWithSlowWork leads x with work that ignores its ctx until
// workUntil, and returns the election once that work runs.
func leadWithSlowWork(t *testing.T, c *simba.Client, workUntil time.Time) *simba.Election {
	t.Helper()
	el := c.Election("x")
	elected := make(chan struct{})
	go func() {
		_ = el.RunWhileLeader(context.Background(), func(context.Context, *simba.Term) error {
			close(elected)
			time.Sleep(time.Until(workUntil)) // work that ignores its ctx
			return nil
		})
	}()
	select {
	case <-elected:
	case <-time.After(5 * time.Second):
		t.Fatal("x was not won")
	}
	return el
}

// endBeforeTheHandover calls end, the election's Stop or StepDown named
// by verb, with a ctx that ends before the handover does, and fails t
// unless end says the handover goes on in the background.
func endBeforeTheHandover(t *testing.T, verb string, end func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := end(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s while the work runs = %v, want the handover to go on in the background", verb, err)
	}
}

// stopDuringSlowWork leads x with work that ignores its ctx until
// workUntil, then stops the election with a ctx that ends before the
// handover does, so that the handover goes on in the background. It returns
// once Stop has returned.
func stopDuringSlowWork(t *testing.T, c *simba.Client, workUntil time.Time) {
	t.Helper()
	endBeforeTheHandover(t, "Stop", leadWithSlowWork(t, c, workUntil).Stop)
}

// An election started again while the handover of its last Stop still runs
// contends once the handover is over: it wins the lease the handover freed.
func TestElectionStartedDuringAHandoverContendsAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		c := newClient(t, srv.Connect())
		awaitLive(t, c)
		workUntil := time.Now().Add(1500 * time.Millisecond)
		stopDuringSlowWork(t, c, workUntil)
		rec := newRecorder()
		if err := c.Election("x").Start(rec); err != nil {
			t.Fatalf("Start during the handover: %v", err)
		}
		select {
		case got := <-rec.ch:
			if !got.elected {
				t.Fatalf("first callback is OnRevoked(%v), want OnElected", got.term)
			}
		case <-time.After(10 * time.Second):
			id, tok, owned := srv.Owner("x")
			t.Fatalf("the election started during the handover was not elected within 10s of it (x owned=%v by %s at %d; snapshot %+v)",
				owned, id, tok, c.Snapshot().Leases)
		}
	})
}

// A lock of a name whose election is being handed over gets the lease once
// the handover has released it, within its own timeout.
func TestLockAcquiredDuringAHandoverOfTheNameWinsAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		c := newClient(t, srv.Connect())
		awaitLive(t, c)
		workUntil := time.Now().Add(1500 * time.Millisecond)
		stopDuringSlowWork(t, c, workUntil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		lt, err := c.Lock("x").Acquire(ctx)
		if err != nil {
			id, tok, owned := srv.Owner("x")
			t.Fatalf("Acquire during the handover of x failed after %v: %v (x owned=%v by %s at %d)",
				time.Since(start), err, owned, id, tok)
		}
		_ = lt.Release(context.Background())
	})
}

// Close while the handover of a Stop still waits for leader work keeps the
// order of that handover: the lease is not freed before the work exited
// (R-HO-1), the session's close included.
func TestCloseDuringAHandoverWaitsForItsWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		c := newClient(t, srv.Connect())
		awaitLive(t, c)
		workUntil := time.Now().Add(1500 * time.Millisecond)
		stopDuringSlowWork(t, c, workUntil)
		closed := make(chan error, 1)
		go func() { closed <- c.Close(context.Background()) }()
		time.Sleep(200 * time.Millisecond)
		_, _, owned := srv.Owner("x")
		left := time.Until(workUntil)
		time.Sleep(left + time.Second) // the work exits, and the handover ends
		if !owned {
			t.Fatalf("x was freed %v before the work of its handover exited", left)
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
	})
}

// A second StepDown while the first one's handover still waits for the
// work does not end that handover early: no new term is won, and no work
// of a new term starts, before the old term's work has exited (R-HO-1,
// R-CB-2).
func TestSecondStepDownDuringAHandoverKeepsItsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		c := newClient(t, srv.Connect())
		awaitLive(t, c)
		el := c.Election("x")
		start := time.Now()
		workUntil := start.Add(1500 * time.Millisecond)
		type run struct {
			token         uint64
			started, done time.Time
		}
		runs := make(chan run, 10)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go func() {
			_ = el.RunWhileLeader(ctx, func(ctx context.Context, term *simba.Term) error {
				r := run{token: term.Token(), started: time.Now()}
				if time.Now().Before(workUntil) {
					time.Sleep(time.Until(workUntil)) // the first term's work ignores its ctx
				} else {
					<-ctx.Done()
				}
				r.done = time.Now()
				runs <- r
				return nil
			})
		}()
		time.Sleep(100 * time.Millisecond)
		if el.Term() == nil {
			t.Fatal("x was not won")
		}
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := el.StepDown(short, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("StepDown while the work runs = %v, want the handover to go on in the background", err)
		}
		if err := el.StepDown(context.Background(), 0); err != nil {
			t.Fatalf("second StepDown: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		if term := el.Term(); term != nil && time.Now().Before(workUntil) {
			t.Fatalf("term %d won %v before the work of the term handed over exited", term.Token(), time.Until(workUntil))
		}
		time.Sleep(time.Until(workUntil.Add(2 * time.Second)))
		stop()
		first := <-runs
		if first.done.Before(workUntil) {
			t.Fatalf("first work done at %v, want at %v", first.done.Sub(start), workUntil.Sub(start))
		}
		time.Sleep(time.Second)
		select {
		case second := <-runs:
			if second.started.Before(first.done) {
				t.Fatalf("work of term %d started at %v while the work of term %d ran until %v",
					second.token, second.started.Sub(start), first.token, first.done.Sub(start))
			}
		default:
		}
	})
}

// A Stop while the handover of an earlier StepDown still waits for the
// release returns after that term's OnRevoked ran: after Stop the listener
// gets nothing more (R-CB-3).
func TestStopDuringAStepDownHandoverReturnsAfterItsOnRevoked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		conn := srv.Connect()
		c := newClient(t, conn)
		awaitLive(t, c)
		rec := newRecorder()
		el := c.Election("x")
		if err := el.Start(rec); err != nil {
			t.Fatal(err)
		}
		rec.elected(t, 5*time.Second)
		conn.Delay(800 * time.Millisecond) // the handover's release is slow
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := el.StepDown(short, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("StepDown with a slow release = %v, want the handover to go on in the background", err)
		}
		if err := el.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		stopped := time.Now()
		rec.mu.Lock()
		before := len(rec.calls)
		rec.mu.Unlock()
		conn.Delay(0)
		time.Sleep(3 * time.Second)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, got := range rec.calls[before:] {
			t.Errorf("callback elected=%v %v reason %v came %v after Stop returned",
				got.elected, got.term, got.reason, got.at.Sub(stopped))
		}
	})
}

// stepDownThenStopDuringSlowWork leads x with work that ignores its ctx
// until workUntil, then steps it down and stops it, each with a ctx that
// ends before the step-down's handover does.
func stepDownThenStopDuringSlowWork(t *testing.T, c *simba.Client, workUntil time.Time) {
	t.Helper()
	el := leadWithSlowWork(t, c, workUntil)
	endBeforeTheHandover(t, "StepDown", func(ctx context.Context) error { return el.StepDown(ctx, 0) })
	endBeforeTheHandover(t, "Stop", el.Stop)
}

// A Stop after a StepDown whose handover still waits for the work does not
// drop the election's state: an election started again wins no term on
// the same session before the old term's work exited (R-HO-1).
func TestStartAfterStepDownAndStopWaitsForTheHandover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		c := newClient(t, srv.Connect())
		awaitLive(t, c)
		workUntil := time.Now().Add(2 * time.Second)
		stepDownThenStopDuringSlowWork(t, c, workUntil)
		rec := newRecorder()
		if err := c.Election("x").Start(rec); err != nil {
			t.Fatalf("Start during the handover: %v", err)
		}
		got := rec.next(t, 10*time.Second)
		if !got.elected {
			t.Fatalf("first callback is OnRevoked(%v), want OnElected", got.term)
		}
		if got.at.Before(workUntil) {
			t.Errorf("term %d elected %v before the work of the term handed over exited",
				got.term.Token(), workUntil.Sub(got.at))
		}
		time.Sleep(time.Until(workUntil)) // the old work exits
	})
}

// Close after a StepDown and a Stop that both returned before the
// handover ended still waits for that handover's work before it frees the
// lease (R-HO-1).
func TestCloseAfterStepDownAndStopWaitsForTheHandoverWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		c := newClient(t, srv.Connect())
		awaitLive(t, c)
		workUntil := time.Now().Add(2 * time.Second)
		stepDownThenStopDuringSlowWork(t, c, workUntil)
		closed := make(chan error, 1)
		go func() { closed <- c.Close(context.Background()) }()
		time.Sleep(200 * time.Millisecond)
		if _, _, owned := srv.Owner("x"); !owned {
			t.Errorf("x was freed %v before the work of its handover exited", time.Until(workUntil))
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if early := time.Until(workUntil); early > 0 {
			t.Errorf("Close returned %v before the work of the handover exited", early)
			time.Sleep(early) // the work exits
		}
	})
}
