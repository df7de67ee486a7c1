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

// R-WORK-1, R-HO-3: the work runs once per term and is interrupted when
// the term is lost.
func TestRunWhileLeaderOncePerTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		ctx, cancel := context.WithCancel(context.Background())
		var runs atomic.Int32
		tokens := make(chan uint64, 10)
		done := make(chan error)
		go func() {
			done <- c.Election("job").RunWhileLeader(ctx, func(ctx context.Context, term *simba.Term) error {
				runs.Add(1)
				tokens <- term.Token()
				<-ctx.Done()
				return nil
			})
		}()
		first := <-tokens
		s.TakeOver("job") // the next keep-alive revokes the term; the work is interrupted
		time.Sleep(1100 * time.Millisecond)
		if _, tok, _ := s.Owner("job"); tok == first {
			t.Fatal("take-over did not happen")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if runs.Load() != 1 {
			t.Fatalf("%d runs for one term", runs.Load())
		}
	})
}

// R-HO-1: Stop waits for the work to exit before releasing the lease.
func TestOrderedHandoverWaitsForWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		var exitedAt atomic.Int64
		start := time.Now()
		done := make(chan error)
		go func() {
			done <- c.Election("job").RunWhileLeader(ctx, func(ctx context.Context, term *simba.Term) error {
				close(started)
				<-ctx.Done()
				time.Sleep(700 * time.Millisecond) // cleanup after the interruption
				exitedAt.Store(int64(time.Since(start)))
				return nil
			})
		}()
		<-started
		time.Sleep(100 * time.Millisecond)
		cancel()
		time.Sleep(500 * time.Millisecond)
		if _, _, held := s.Owner("job"); !held {
			t.Fatal("lease released while the work was still running")
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, _, held := s.Owner("job"); held {
			t.Fatal("lease still held after the handover")
		}
		if time.Duration(exitedAt.Load()) != 800*time.Millisecond || time.Since(start) != 800*time.Millisecond {
			t.Fatalf("work exited at %v, handover done at %v", time.Duration(exitedAt.Load()), time.Since(start))
		}
	})
}

// R-HO-1: work that ignores the interruption delays the handover at most
// to the term's deadline at the stop.
func TestOrderedHandoverBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		release := make(chan struct{})
		started := make(chan struct{})
		el := c.Election("job")
		_ = el.Start(simba.ListenerFuncs{})
		_ = el.Stop(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_ = el.RunWhileLeader(ctx, func(ctx context.Context, term *simba.Term) error {
				close(started)
				<-release // ignores ctx
				return nil
			})
		}()
		<-started
		defer close(release)
		start := time.Now()
		cancel()
		const step = time.Millisecond
		for {
			if _, _, held := s.Owner("job"); !held {
				break
			}
			time.Sleep(step)
		}
		// The term had at most 3s left at the stop; the poll adds one step.
		if d := time.Since(start); d > 3*time.Second+step {
			t.Fatalf("handover took %v, longer than the term's remaining 3s", d)
		}
	})
}

// R-WORK-2: Schedule runs on the leader only, at a fixed rate.
func TestScheduleOnLeaderOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c1 := newClient(t, s.Connect())
		c2 := newClient(t, s.Connect())
		var mu sync.Mutex
		runs := map[*simba.Client]int{}
		var stops []func() // the follower's first: the leader's stop would hand it the lease
		for _, c := range []*simba.Client{c1, c2} {
			ctx, cancel := context.WithCancel(context.Background())
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				_ = c.Election("tick").Schedule(ctx, time.Second, func(ctx context.Context, term *simba.Term) error {
					if !term.Valid() {
						t.Error("scheduled run on an invalid term")
					}
					mu.Lock()
					runs[c]++
					mu.Unlock()
					return nil
				})
			}()
			stops = append([]func(){func() { cancel(); <-ended }}, stops...)
			synctest.Wait()
		}
		time.Sleep(10*time.Second - time.Millisecond)
		for _, stop := range stops {
			stop()
		}
		mu.Lock()
		defer mu.Unlock()
		if runs[c1] != 10 || runs[c2] != 0 {
			t.Fatalf("runs: leader %d (want 10 in 10s), follower %d (want 0)", runs[c1], runs[c2])
		}
	})
}

// A run that overruns skips the starts it missed: the next one is the
// first of the period's grid after the run ended, found at once however
// many starts were missed (an hour of a 1µs period is 3.6e9 of them).
func TestScheduleSkipsTheStartsARunOverran(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New().Connect())
		const period = time.Microsecond
		const overrun = time.Hour + 500*time.Nanosecond
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var starts []time.Time
		err := c.Election("tick").Schedule(ctx, period, func(context.Context, *simba.Term) error {
			starts = append(starts, time.Now())
			switch len(starts) {
			case 1:
				time.Sleep(overrun)
			case 3:
				cancel()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(starts) != 3 {
			t.Fatalf("%d runs, want 3", len(starts))
		}
		want := []time.Duration{0, overrun.Truncate(period) + period, overrun.Truncate(period) + 2*period}
		for i, at := range starts {
			if got := at.Sub(starts[0]); got != want[i] {
				t.Fatalf("run %d started %v after the first, want %v", i+1, got, want[i])
			}
		}
	})
}

// A failing or panicking run is reported and the client goes on; with
// StepDownOnError the node steps down.
func TestWorkFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		var failed atomic.Int32
		c := newClient(t, s.Connect(), simba.WithEventListener(func(_ context.Context, e simba.Event) {
			if e.Kind == simba.EventWorkFailed {
				failed.Add(1)
			}
		}))
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int32
		done := make(chan error)
		go func() {
			done <- c.Election("job").Schedule(ctx, time.Second, func(context.Context, *simba.Term) error {
				if n.Add(1)%2 == 0 {
					panic("boom")
				}
				return errors.New("bad run")
			})
		}()
		time.Sleep(3500 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n.Load() != 4 || failed.Load() != 4 {
			t.Fatalf("%d runs, %d failures reported", n.Load(), failed.Load())
		}

		var terms atomic.Int32
		ctx2, cancel2 := context.WithCancel(context.Background())
		go func() {
			done <- c.Election("job2").RunWhileLeader(ctx2, func(context.Context, *simba.Term) error {
				terms.Add(1)
				return errors.New("fail")
			}, simba.StepDownOnError(2*time.Second))
		}()
		time.Sleep(5 * time.Second)
		cancel2()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if terms.Load() != 3 { // at 0s, 2s and 4s
			t.Fatalf("%d terms in 5s with a 2s step-down cooldown", terms.Load())
		}
	})
}

// R-HO-1: keep-alives during a long handover do not release the lease
// before the work exited.
func TestHandoverSurvivesKeepAlives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		done := make(chan error)
		go func() {
			done <- c.Election("job").RunWhileLeader(ctx, func(ctx context.Context, term *simba.Term) error {
				close(started)
				<-ctx.Done()
				time.Sleep(2500 * time.Millisecond) // longer than two renew intervals
				return nil
			})
		}()
		<-started
		cancel()
		time.Sleep(2400 * time.Millisecond)
		if _, _, held := s.Owner("job"); !held {
			t.Fatal("lease released during the handover, before the work exited")
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, _, held := s.Owner("job"); held {
			t.Fatal("lease held after the handover")
		}
	})
}

// Leader work calls end with the client: RunWhileLeader, Schedule and
// Group.Run return an error matching ErrClosed at once after Close, and
// the work has been interrupted.
func TestWorkCallsReturnAfterClose(t *testing.T) {
	calls := map[string]func(c *simba.Client, started chan<- struct{}) error{
		"RunWhileLeader": func(c *simba.Client, started chan<- struct{}) error {
			return c.Election("job").RunWhileLeader(context.Background(), func(ctx context.Context, _ *simba.Term) error {
				started <- struct{}{}
				<-ctx.Done()
				return nil
			})
		},
		"Schedule": func(c *simba.Client, started chan<- struct{}) error {
			return c.Election("job").Schedule(context.Background(), time.Second, func(context.Context, *simba.Term) error {
				started <- struct{}{}
				return nil
			})
		},
		"Group.Run": func(c *simba.Client, started chan<- struct{}) error {
			return c.Group("parts", 2).Run(context.Background(), func(ctx context.Context, _ int, _ *simba.Term) error {
				started <- struct{}{}
				<-ctx.Done()
				return nil
			})
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := memory.New()
				c := newClient(t, s.Connect())
				started := make(chan struct{}, 10)
				done := make(chan error, 1)
				go func() { done <- call(c, started) }()
				<-started
				if err := c.Close(context.Background()); err != nil {
					t.Fatalf("Close: %v", err)
				}
				closedAt := time.Now()
				select {
				case err := <-done:
					if !errors.Is(err, simba.ErrClosed) {
						t.Fatalf("returned %v, want ErrClosed", err)
					}
					if d := time.Since(closedAt); d != 0 {
						t.Fatalf("returned %v after Close", d)
					}
				case <-time.After(time.Minute):
					t.Fatal("still blocked a minute after Close")
				}
			})
		})
	}
}

// A work that fails while its term lasts ends RunWhileLeader with a
// *WorkError, after the lease was released, so another node takes over;
// a panic is returned the same way.
func TestRunWhileLeaderReturnsWorkFailure(t *testing.T) {
	boom := errors.New("boom")
	for name, fn := range map[string]simba.WorkFunc{
		"error": func(context.Context, *simba.Term) error { return boom },
		"panic": func(context.Context, *simba.Term) error { panic("kaput") },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := memory.New()
				c1 := newClient(t, s.Connect())
				c2 := newClient(t, s.Connect())
				err := c1.Election("job").RunWhileLeader(context.Background(), func(ctx context.Context, term *simba.Term) error {
					time.Sleep(100 * time.Millisecond)
					return fn(ctx, term)
				})
				var we *simba.WorkError
				if !errors.As(err, &we) || we.Name != "job" || we.Token == 0 {
					t.Fatalf("RunWhileLeader returned %v, want a *WorkError of job", err)
				}
				if name == "error" && !errors.Is(err, boom) {
					t.Fatalf("%v does not wrap the work's error", err)
				}
				if name == "panic" && (we.Panic != "kaput" || !strings.Contains(err.Error(), "kaput")) {
					t.Fatalf("panic value %v in %v", we.Panic, err)
				}
				if _, _, held := s.Owner("job"); held {
					t.Fatal("lease still held after RunWhileLeader returned")
				}
				r := newRecorder()
				_ = c2.Election("job").Start(r)
				if term := r.elected(t, time.Second); term.Token() <= we.Token {
					t.Fatalf("next term %v after the failed one %d", term, we.Token)
				}
			})
		})
	}
}

// A work that returns nil while its term lasts has finished: RunWhileLeader
// stops leading and returns nil; the lease is free.
func TestRunWhileLeaderReturnsWhenWorkDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		var runs atomic.Int32
		err := c.Election("once").RunWhileLeader(context.Background(), func(context.Context, *simba.Term) error {
			runs.Add(1)
			return nil
		})
		if err != nil || runs.Load() != 1 {
			t.Fatalf("RunWhileLeader = %v after %d runs, want nil after 1", err, runs.Load())
		}
		if _, _, held := s.Owner("once"); held {
			t.Fatal("lease held after the work finished")
		}
	})
}

// Stop called elsewhere ends RunWhileLeader with nil.
func TestRunWhileLeaderEndsOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		started := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- c.Election("job").RunWhileLeader(context.Background(), func(ctx context.Context, _ *simba.Term) error {
				close(started)
				<-ctx.Done()
				return nil
			})
		}()
		<-started
		if err := c.Election("job").Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("RunWhileLeader after Stop: %v", err)
		}
	})
}

// A partition whose work fails ends Group.Run with the *WorkError; a
// partition whose work returns nil is given up and taken again later.
func TestGroupWorkOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		var runs [2]atomic.Int32
		boom := errors.New("boom")
		start := time.Now()
		err := c.Group("g", 2).Run(context.Background(), func(ctx context.Context, p int, _ *simba.Term) error {
			n := runs[p].Add(1)
			if p == 0 {
				return nil // done for now: given up, run again on a later term
			}
			if n == 1 {
				<-time.After(5 * time.Second)
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Group.Run returned %v, want the partition's error", err)
		}
		var we *simba.WorkError
		if !errors.As(err, &we) || we.Name != "g.1" {
			t.Fatalf("%v is not a *WorkError of g.1", err)
		}
		if d := time.Since(start); d < 5*time.Second {
			t.Fatalf("returned after %v", d)
		}
		if n := runs[0].Load(); n < 3 {
			t.Fatalf("partition 0 ran %d times in 5s, want it given up and taken again", n)
		}
		for _, name := range []string{"g.0", "g.1"} {
			if _, _, held := s.Owner(name); held {
				t.Fatalf("%s held after Group.Run returned", name)
			}
		}
	})
}

// RunWhileLeader returns after a Stop elsewhere or a Close only once its
// work has exited (bounded by the term's deadline), never while it runs.
func TestRunWhileLeaderReturnsAfterItsWorkExited(t *testing.T) {
	for _, how := range []string{"Stop", "Close"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := memory.New()
				c := newClient(t, s.Connect())
				started := make(chan struct{})
				var exited atomic.Bool
				done := make(chan error, 1)
				go func() {
					done <- c.Election("job").RunWhileLeader(context.Background(), func(ctx context.Context, _ *simba.Term) error {
						close(started)
						<-ctx.Done()
						time.Sleep(500 * time.Millisecond) // cleanup after the interruption
						exited.Store(true)
						return nil
					})
				}()
				<-started
				go func() {
					if how == "Stop" {
						_ = c.Election("job").Stop(context.Background())
					} else {
						_ = c.Close(context.Background())
					}
				}()
				if err := <-done; how == "Stop" && err != nil || how == "Close" && !errors.Is(err, simba.ErrClosed) {
					t.Fatalf("RunWhileLeader after %s = %v", how, err)
				}
				if !exited.Load() {
					t.Fatalf("RunWhileLeader returned after %s while its work was still running", how)
				}
			})
		})
	}
}

// RunWhileLeader returns only once every work it started has exited, the
// work of a term lost by a take-over included: when its ctx ends, or when
// the work of a later term returns, the call still waits for the work of
// the term lost before, which ignores its ctx (R-HO-1).
func TestRunWhileLeaderWaitsForTheWorkOfALostTerm(t *testing.T) {
	for _, how := range []string{"ctx done", "work done"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := memory.New()
				c := newClient(t, s.Connect())
				workUntil := time.Now().Add(2 * time.Second)
				var exited atomic.Bool
				lost := make(chan struct{})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					done <- c.Election("job").RunWhileLeader(ctx, func(ctx context.Context, term *simba.Term) error {
						if term.Token() > 1 {
							return nil // the later term's work is done at once
						}
						s.TakeOver("job")
						<-ctx.Done()
						close(lost)
						time.Sleep(time.Until(workUntil)) // ignores the end of its term
						exited.Store(true)
						return nil
					})
				}()
				<-lost
				if how == "ctx done" {
					cancel()
				} else {
					id, _, _ := s.Owner("job")
					s.ExpireSession(id) // the phantom goes: the next term is won
				}
				if err := <-done; err != nil {
					t.Fatalf("RunWhileLeader = %v", err)
				}
				if !exited.Load() {
					t.Errorf("RunWhileLeader returned %v before the work of the term taken over exited", time.Until(workUntil))
					time.Sleep(time.Until(workUntil)) // the work exits
				}
			})
		})
	}
}

// The wait for the work of a lost term is bounded by the deadline that
// term had when it was revoked: the session renewed since, for other
// terms or none, does not make RunWhileLeader wait longer for work that
// ignores its ctx.
func TestRunWhileLeaderWaitsForLostWorkOnlyUntilItsTermsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		lease := testConfig().LeaseDuration
		revoked := make(chan time.Time, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- c.Election("job").RunWhileLeader(ctx, func(ctx context.Context, term *simba.Term) error {
				s.TakeOver("job") // a live phantom holds it from now on
				<-ctx.Done()
				revoked <- time.Now()
				time.Sleep(time.Hour) // ignores the end of its term
				return nil
			})
		}()
		at := <-revoked
		time.Sleep(lease / 2) // keep-alives renew the session meanwhile
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("RunWhileLeader = %v", err)
		}
		if waited := time.Since(at); waited > lease {
			t.Fatalf("RunWhileLeader returned %v after the term was revoked, past the %v its deadline was then at most", waited, lease)
		}
		time.Sleep(time.Hour) // the work returns at last
	})
}

// Work that returns because its term's deadline passed (here: it sleeps
// past it on a stalled connection) was interrupted, not failed: no
// EventWorkFailed, and RunWhileLeader goes on to the next term.
func TestWorkPastItsDeadlineIsInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		var failed atomic.Int32
		c := newClient(t, conn, simba.WithEventListener(func(_ context.Context, e simba.Event) {
			if e.Kind == simba.EventWorkFailed {
				failed.Add(1)
			}
		}))
		var runs atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- c.Election("job").RunWhileLeader(ctx, func(ctx context.Context, term *simba.Term) error {
				if runs.Add(1) == 1 {
					conn.Stall()
					time.Sleep(term.Remaining())
					conn.Unstall()
					return term.EnsureValid(0)
				}
				<-ctx.Done()
				return nil
			})
		}()
		time.Sleep(10 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("RunWhileLeader = %v, want nil: the work was interrupted, not failed", err)
		}
		if runs.Load() != 2 || failed.Load() != 0 {
			t.Fatalf("%d runs, %d failures reported; want 2 runs, none failed", runs.Load(), failed.Load())
		}
	})
}

// Close called from one election's work waits for the other elections'
// work before the session, and their leases, are released (R-HO-1).
func TestCloseFromWorkWaitsForOtherWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		otherRunning := make(chan struct{})
		var otherExited atomic.Bool
		go func() {
			_ = c.Election("other").RunWhileLeader(context.Background(), func(ctx context.Context, _ *simba.Term) error {
				close(otherRunning)
				<-ctx.Done()
				time.Sleep(300 * time.Millisecond)
				otherExited.Store(true)
				return nil
			})
		}()
		<-otherRunning
		heldAtClose := make(chan bool, 1)
		go func() {
			_ = c.Election("closer").RunWhileLeader(context.Background(), func(ctx context.Context, _ *simba.Term) error {
				_ = c.Close(ctx)
				heldAtClose <- otherExited.Load()
				return nil
			})
		}()
		if !<-heldAtClose {
			t.Fatal("Close from one work returned before the other work exited")
		}
	})
}
