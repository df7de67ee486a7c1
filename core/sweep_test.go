package simba_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

func TestClientSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		c := newClient(t, srv.Connect())
		ctx := context.Background()
		l := c.Lock("invoice-17")
		var last uint64
		for range 2 {
			lt, err := l.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			last = lt.Token()
			if err := lt.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		held, err := c.Lock("invoice-18").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}

		time.Sleep(time.Minute)
		n, err := c.Sweep(ctx, time.Minute)
		if err != nil || n != 1 {
			t.Fatalf("Sweep = %d, %v; want 1 (invoice-17), nil", n, err)
		}
		if got := srv.LastToken("invoice-17"); got != 0 {
			t.Fatalf("invoice-17 still has a record (token %d) after the sweep", got)
		}
		if !held.Valid() {
			t.Fatal("the held lock's term ended with the sweep")
		}
		lt, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lt.Token() <= last {
			t.Fatalf("token %d after the sweep, want above %d", lt.Token(), last)
		}
	})
}

func TestClientSweepErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New().Connect())
		for _, idle := range []time.Duration{0, -time.Second} {
			if _, err := c.Sweep(context.Background(), idle); !errors.Is(err, simba.ErrInvalidArgument) {
				t.Errorf("Sweep(%v) = %v, want ErrInvalidArgument", idle, err)
			}
		}
		if _, err := c.Sweep(nil, time.Second); !errors.Is(err, simba.ErrInvalidArgument) { //nolint:staticcheck // a nil context is the input under test
			t.Errorf("Sweep(nil ctx) = %v, want ErrInvalidArgument", err)
		}
		plain := newClient(t, struct{ simba.Backend }{memory.New().Connect()})
		if _, err := plain.Sweep(context.Background(), time.Second); !errors.Is(err, simba.ErrNotSupported) {
			t.Errorf("Sweep on a backend without the capability = %v, want ErrNotSupported", err)
		}
	})
}

// A job that removes the state of the names nobody has used for a day, so
// that a lock per invoice does not leave a record per invoice for ever.
// Tokens keep increasing: a name used again gets a token above its old ones.
// Scheduled on an election, the sweep runs on one node of the fleet at a
// time, every hour here (Schedule blocks until ctx ends).
func ExampleClient_Sweep() {
	client, err := simba.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())

	ctx, stop := context.WithCancel(context.Background())
	err = client.Election("lease-sweeper").Schedule(ctx, time.Hour, func(ctx context.Context, _ *simba.Term) error {
		defer stop() // this example stops after the first run
		removed, err := client.Sweep(ctx, 24*time.Hour)
		if err != nil {
			return err // reported as EventWorkFailed; the schedule goes on
		}
		fmt.Println("removed", removed)
		return nil
	})
	fmt.Println("schedule ended:", err)
	// Output:
	// removed 0
	// schedule ended: <nil>
}
