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
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, c := range []*simba.Client{c1, c2} {
			wg.Go(func() {
				_ = c.Election("tick").Schedule(ctx, time.Second, func(ctx context.Context, term *simba.Term) error {
					if !term.Valid() {
						t.Error("scheduled run on an invalid term")
					}
					mu.Lock()
					runs[c]++
					mu.Unlock()
					return nil
				})
			})
			synctest.Wait()
		}
		time.Sleep(10*time.Second - time.Millisecond)
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if runs[c1] != 10 || runs[c2] != 0 {
			t.Fatalf("runs: leader %d (want 10 in 10s), follower %d (want 0)", runs[c1], runs[c2])
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
