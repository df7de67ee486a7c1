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

// notStarted fails the test unless err says, at once, that the client was
// not started.
func notStarted(t *testing.T, call string, err error) {
	t.Helper()
	if !errors.Is(err, simba.ErrClientNotStarted) || !errors.Is(err, simba.ErrNotStarted) {
		t.Fatalf("%s before Start: %v, want ErrClientNotStarted (and ErrNotStarted)", call, err)
	}
}

// Before Start, a client built WithDeferredStart refuses at once every
// call that would contend or ask the backend, with ErrClientNotStarted,
// instead of waiting for a session that is not opening; it makes no
// backend call. After Start the same calls work.
func TestCallsBeforeADeferredStartFailAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memory.New().Connect()
		c := newClient(t, conn, simba.WithDeferredStart())
		start := time.Now()
		_, err := c.Lock("early").Acquire(context.Background())
		notStarted(t, "Acquire", err)
		zero, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		_, err = c.Lock("early").Acquire(zero)
		notStarted(t, "Acquire with a zero timeout", err)
		_, err = c.Lock("early").TryAcquire(context.Background())
		notStarted(t, "TryAcquire", err)
		notStarted(t, "Election.Start", c.Election("early").Start(newRecorder()))
		notStarted(t, "RunWhileLeader", c.Election("early").RunWhileLeader(context.Background(),
			func(context.Context, *simba.Term) error { return nil }))
		notStarted(t, "Schedule", c.Election("early").Schedule(context.Background(), time.Second,
			func(context.Context, *simba.Term) error { return nil }))
		notStarted(t, "Group.Run", c.Group("early", 2).Run(context.Background(),
			func(context.Context, int, *simba.Term) error { return nil }))
		_, _, err = c.Holder(context.Background(), "early")
		notStarted(t, "Holder", err)
		notStarted(t, "ObserveHolder", c.ObserveHolder(context.Background(), "early", func(simba.Holder, bool) {}))
		_, err = c.Sweep(context.Background(), time.Hour)
		notStarted(t, "Sweep", err)
		if d := time.Since(start); d != 0 {
			t.Fatalf("the calls before Start took %v, want none", d)
		}
		synctest.Wait()
		if calls := conn.Calls(); len(calls) != 0 {
			t.Fatalf("backend calls before Start: %v", calls)
		}

		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		lt, err := c.Lock("early").Acquire(context.Background())
		if err != nil {
			t.Fatalf("Acquire after Start: %v", err)
		}
		if _, _, err := c.Holder(context.Background(), "early"); err != nil {
			t.Fatalf("Holder after Start: %v", err)
		}
		if err := lt.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Closing a client that never started sends its listeners nothing: there
// was no session to close.
func TestCloseOfAClientNeverStartedEmitsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		c, err := simba.New(memory.New().Connect(), simba.WithDeferredStart(), simba.WithEventListener(log.listen))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		log.mu.Lock()
		defer log.mu.Unlock()
		if len(log.events) != 0 {
			t.Fatalf("events of a client never started: %v", log.events)
		}
	})
}
