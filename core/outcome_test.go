package simba_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// The engine owns the lease state: a call whose outcome is unknown makes
// the next keep-alives ask which of its names the session owns, and the
// engine frees what it does not hold (docs/adr/0033).

// An acquire whose reply is lost won the lease on the store; the engine,
// which never saw the win, frees it at the next keep-alive.
func TestAcquireWithALostReplyIsFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		conn := srv.Connect()
		c := newClient(t, conn)
		awaitLive(t, c)
		conn.DropReplies(true)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := c.Lock("x").Acquire(ctx)
		cancel()
		conn.DropReplies(false)
		if err == nil {
			t.Fatal("Acquire with every reply lost succeeded")
		}
		if _, _, owned := srv.Owner("x"); !owned {
			t.Fatal("the lost acquire did not reach the store: nothing to test")
		}
		time.Sleep(2100 * time.Millisecond) // two keep-alives
		if id, tok, owned := srv.Owner("x"); owned {
			t.Fatalf("x is still owned by %s at token %d after two keep-alives: the orphan of a lost reply was kept", id, tok)
		}
	})
}

// A release that failed before it reached the store is sent again after
// the next keep-alive finds the lease still owned.
func TestReleaseThatNeverLandedIsSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		conn := srv.Connect()
		c := newClient(t, conn)
		lt, err := c.Lock("x").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conn.Fail(errors.New("connection reset"))
		if err := lt.Release(context.Background()); err == nil {
			t.Fatal("Release through a failing connection succeeded")
		}
		conn.Fail(nil)
		if _, _, owned := srv.Owner("x"); !owned {
			t.Fatal("the failed release reached the store: nothing to test")
		}
		time.Sleep(1100 * time.Millisecond)
		if id, tok, owned := srv.Owner("x"); owned {
			t.Fatalf("x is still owned by %s at token %d after a keep-alive: a release that never landed was not sent again", id, tok)
		}
	})
}

// lateBackend makes the first Acquire of a name fail at once while the
// acquire still commits on the store later: a statement that outlived
// its cancel request.
type lateBackend struct {
	simba.Backend
	after time.Duration
	mu    sync.Mutex
	done  map[string]bool
	wg    sync.WaitGroup
}

func (b *lateBackend) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	b.mu.Lock()
	first := !b.done[name]
	b.done[name] = true
	b.mu.Unlock()
	if !first {
		return b.Backend.Acquire(ctx, s, name)
	}
	b.wg.Go(func() {
		time.Sleep(b.after)
		_, _ = b.Backend.Acquire(context.Background(), s, name)
	})
	return simba.AcquireResult{}, errors.New("connection reset while the statement ran")
}

// A call that commits after it gave up, within a lease, is still freed:
// the name stays unsure until a keep-alive sent a lease after the call.
func TestLateCommitWithinALeaseIsFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		late := &lateBackend{Backend: srv.Connect(), after: 2500 * time.Millisecond, done: map[string]bool{}}
		c := newClient(t, late)
		awaitLive(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := c.Lock("x").Acquire(ctx)
		cancel()
		if err == nil {
			t.Fatal("Acquire whose first call fails and whose context ends succeeded")
		}
		time.Sleep(2600 * time.Millisecond)
		if _, _, owned := srv.Owner("x"); !owned {
			t.Fatal("the late acquire did not commit: nothing to test")
		}
		time.Sleep(1500 * time.Millisecond) // past the keep-alive sent a lease after the call
		if id, tok, owned := srv.Owner("x"); owned {
			t.Fatalf("x is still owned by %s at token %d: a late commit of an unsure call was kept", id, tok)
		}
		late.wg.Wait()
	})
}

// requests records every keep-alive request.
type requests struct {
	simba.Backend
	mu   sync.Mutex
	reqs []simba.KeepAliveRequest
}

func (r *requests) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Backend.KeepAlive(ctx, s, req)
}

func (r *requests) last() simba.KeepAliveRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

// Every keep-alive sends what the engine holds; while that stays the same
// it sends the same map under the same generation, and a change makes a
// new map and a new generation.
func TestKeepAliveSendsWhatTheEngineHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		rec := &requests{Backend: srv.Connect()}
		c := newClient(t, rec)
		x, err := c.Lock("x").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		y, err := c.Lock("y").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		first := rec.last()
		want := map[string]uint64{"x": x.Token(), "y": y.Token()}
		if !maps.Equal(first.Held, want) || len(first.Unsure) != 0 {
			t.Fatalf("keep-alive request = %+v, want Held %v and nothing unsure", first, want)
		}
		time.Sleep(time.Second)
		if again := rec.last(); again.Generation != first.Generation {
			t.Fatalf("generation went from %d to %d with nothing changed", first.Generation, again.Generation)
		}
		if err := x.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		after := rec.last()
		if after.Generation == first.Generation || !maps.Equal(after.Held, map[string]uint64{"y": y.Token()}) {
			t.Fatalf("after x was released the request is %+v (generation before %d), want only y under a new generation", after, first.Generation)
		}
		if !maps.Equal(first.Held, want) {
			t.Fatalf("the map sent first was changed afterwards: %v", first.Held)
		}
	})
}

// A name stays unsure, and is sent with every keep-alive, until the reply
// to one sent a lease after the call gave up; then it is sent no more.
func TestUnsureNamesAreSentForALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		conn := srv.Connect()
		rec := &requests{Backend: conn}
		c := newClient(t, rec)
		awaitLive(t, c)
		conn.Fail(errors.New("connection reset"))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, _ = c.Lock("x").Acquire(ctx)
		cancel()
		conn.Fail(nil)
		gaveUp := time.Now()
		time.Sleep(1100 * time.Millisecond)
		if got := rec.last().Unsure; !slices.Equal(got, []string{"x"}) {
			t.Fatalf("keep-alive after a failed acquire sent Unsure %v, want [x]", got)
		}
		// The keep-alive sent a lease after the call settles it; the one
		// after it sends it no more.
		time.Sleep(time.Until(gaveUp.Add(testConfig().LeaseDuration + 2100*time.Millisecond)))
		if got := rec.last().Unsure; len(got) != 0 {
			t.Fatalf("keep-alive more than a lease after the failed acquire sent Unsure %v, want none", got)
		}
	})
}

// A late commit that a keep-alive reports while a handover of the name
// runs is kept unsure, and freed once the handover is over: the handover
// releases its own term's token, not the late one's.
func TestLateCommitDuringAHandoverIsFreedAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		late := &lateBackend{Backend: srv.Connect(), after: 2200 * time.Millisecond, done: map[string]bool{}}
		c := newClient(t, late)
		awaitLive(t, c)
		start := time.Now() // the first attempt fails now; it commits 2.2s later
		el := c.Election("x")
		worked := make(chan struct{})
		go func() {
			_ = el.RunWhileLeader(context.Background(), func(context.Context, *simba.Term) error {
				time.Sleep(time.Until(start.Add(4500 * time.Millisecond))) // work that ignores its ctx
				return nil
			})
			close(worked)
		}()
		time.Sleep(2050 * time.Millisecond)
		if _, _, owned := srv.Owner("x"); !owned {
			t.Fatal("x was not won by the second attempt: nothing to test")
		}
		if err := el.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-worked
		time.Sleep(3 * time.Second)
		if id, tok, owned := srv.Owner("x"); owned {
			t.Fatalf("x is still owned by %s at token %d after the handover: the late commit reported during it was kept", id, tok)
		}
		late.wg.Wait()
	})
}

// The record of released tokens does not grow with the orphans of names
// no election or lock uses any more.
func TestOrphansOfUnusedNamesLeaveNoRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		conn := srv.Connect()
		c := newClient(t, conn)
		awaitLive(t, c)
		const n = 50
		conn.DropReplies(true)
		for i := range n {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			_, _ = c.Lock(fmt.Sprintf("job-%d", i)).Acquire(ctx)
			cancel()
		}
		conn.DropReplies(false)
		time.Sleep(2 * testConfig().LeaseDuration)
		for i := range n {
			if _, _, owned := srv.Owner(fmt.Sprintf("job-%d", i)); owned {
				t.Fatalf("job-%d is still owned", i)
			}
		}
		if released, unsure := c.SessionMapSizes(); released != 0 || unsure != 0 {
			t.Fatalf("after %d orphans were freed the session records %d released and %d unsure names, want none", n, released, unsure)
		}
	})
}

// A node whose LeaveGroup failed leaves the group at the next keep-alive
// that still counts it a member, so the others take its partitions.
func TestFailedLeaveGroupIsSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		ca, cb := srv.Connect(), srv.Connect()
		a, b := newClient(t, ca), newClient(t, cb)
		var heldA atomic.Int32
		ctxA, stopA := context.WithCancel(context.Background())
		doneA := make(chan struct{})
		go func() {
			_ = a.Group("g", 4).Run(ctxA, func(ctx context.Context, _ int, _ *simba.Term) error {
				heldA.Add(1)
				<-ctx.Done()
				heldA.Add(-1)
				return nil
			})
			close(doneA)
		}()
		ctxB, stopB := context.WithCancel(context.Background())
		doneB := make(chan struct{})
		go func() {
			_ = b.Group("g", 4).Run(ctxB, func(ctx context.Context, _ int, _ *simba.Term) error { <-ctx.Done(); return nil })
			close(doneB)
		}()
		time.Sleep(10 * time.Second)
		if m := srv.Members("g"); m != 2 {
			t.Fatalf("%d members of g, want 2", m)
		}
		cb.Fail(errors.New("connection reset"))
		stopB()
		<-doneB
		time.Sleep(100 * time.Millisecond)
		cb.Fail(nil)
		time.Sleep(10 * time.Second)
		if held := heldA.Load(); held != 4 || srv.Members("g") != 1 {
			t.Errorf("A holds %d of 4 partitions and g has %d members 10s after B left it through a failing connection, want 4 and 1", held, srv.Members("g"))
		}
		stopA()
		<-doneA
	})
}

// awaitLive waits until c's session is open.
func awaitLive(t *testing.T, c *simba.Client) {
	t.Helper()
	for range 100 {
		if c.Snapshot().Session.Status == simba.StatusLive {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("client status %v, want live", c.Snapshot().Session.Status)
}
