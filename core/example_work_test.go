package simba_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

func ExampleElection_RunWhileLeader() {
	client, err := simba.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())

	// RunWhileLeader blocks. This work ends on its own, so the call returns
	// once the work returned and the lease was released; long-running work
	// would run until its ctx ends with the term.
	err = client.Election("migrate").RunWhileLeader(context.Background(), func(ctx context.Context, t *simba.Term) error {
		fmt.Println("migrating under token", t.Token())
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// migrating under token 1
	// done: <nil>
}

func ExampleElection_Schedule() {
	client, err := simba.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	// Every 10ms on the leader only, until ctx ends: here after three runs.
	err = client.Election("tick").Schedule(ctx, 10*time.Millisecond, func(_ context.Context, t *simba.Term) error {
		runs++
		fmt.Printf("run %d under token %d\n", runs, t.Token())
		if runs == 3 {
			cancel()
		}
		return nil // an error is reported (EventWorkFailed) and the schedule goes on
	})
	fmt.Println("stopped:", err)
	// Output:
	// run 1 under token 1
	// run 2 under token 1
	// run 3 under token 1
	// stopped: <nil>
}

func ExampleGroup_Run() {
	client, err := simba.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var taken []string
	// Four partitions, leases "shards.0" to "shards.3"; the only node takes
	// them all. Each work runs until its ctx ends with its term.
	err = client.Group("shards", 4).Run(ctx, func(ctx context.Context, p int, t *simba.Term) error {
		mu.Lock()
		taken = append(taken, t.Name())
		if len(taken) == 4 {
			cancel()
		}
		mu.Unlock()
		<-ctx.Done()
		return nil
	})
	slices.Sort(taken)
	fmt.Println(taken, err)
	// Output: [shards.0 shards.1 shards.2 shards.3] <nil>
}

func ExampleWithConfig() {
	// Zero fields take their defaults: the renew interval is a third of
	// the lease, the retry jitter half the renew interval.
	client, err := simba.New(memory.New(), simba.WithConfig(simba.Config{LeaseDuration: 6 * time.Second}))
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())
	cfg := client.Config()
	fmt.Println(cfg.LeaseDuration, cfg.RenewInterval, cfg.RetryJitter)

	// A config that breaks a bound is refused with an error naming it.
	_, err = simba.New(memory.New(), simba.WithConfig(simba.Config{LeaseDuration: 6 * time.Second, RenewInterval: 4 * time.Second}))
	fmt.Println(err)
	// Output:
	// 6s 2s 1s
	// simba: config RenewInterval: 4s: two keep-alives must fit in LeaseDuration 6s
}

func ExampleWithLogger() {
	server := memory.New()
	server.SetMaxLease(3 * time.Second) // the backend grants less than asked: a warning

	// Structured logs through any slog handler; here, text on stdout
	// without the time and the session id, so that the output is stable.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "session" {
				return slog.Attr{}
			}
			return a
		},
	}))
	client, err := simba.New(server, simba.WithLogger(logger))
	if err != nil {
		panic(err)
	}
	term, err := client.Lock("job").Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	_ = term.Close()
	_ = client.Close(context.Background())
	// Output:
	// level=WARN msg="simba: backend granted a shorter lease than asked; renewing every third of it" asked=15s granted=3s renew=973.333333ms
}

func ExampleWithEventListener() {
	events := make(chan simba.Event, 10)
	client, err := simba.New(memory.New(), simba.WithEventListener(func(_ context.Context, e simba.Event) {
		events <- e // called one event at a time, in order, never under an engine lock
	}))
	if err != nil {
		panic(err)
	}
	term, err := client.Lock("job").Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	_ = term.Close()
	_ = client.Close(context.Background())
	close(events)
	for e := range events {
		fmt.Println(e.Kind, e.Name, e.Reason)
	}
	// Output:
	// SessionOpened  NOT_REVOKED
	// Elected job NOT_REVOKED
	// Revoked job STOPPED
	// SessionClosed  NOT_REVOKED
}

func ExampleWithDeferredStart() {
	store := memory.New()
	client, err := simba.New(store.Connect(), simba.WithDeferredStart())
	if err != nil {
		panic(err)
	}
	fmt.Println("sessions before Start:", len(store.Sessions()))
	if err := client.Start(); err != nil { // the session opens in the background from here
		panic(err)
	}
	term, err := client.Lock("job").Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("sessions after Start:", len(store.Sessions()))
	_ = term.Close()
	_ = client.Close(context.Background())
	// Output:
	// sessions before Start: 0
	// sessions after Start: 1
}

func ExampleWithEventBuffer() {
	stuck, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	dropped := make(chan int, 1)
	client, err := simba.New(memory.New(), simba.WithEventBuffer(4),
		simba.WithEventListener(func(_ context.Context, e simba.Event) {
			once.Do(func() { close(stuck); <-gate }) // a listener stuck on its first event
			if e.Kind == simba.EventDropped {
				dropped <- e.Dropped
			}
		}))
	if err != nil {
		panic(err)
	}
	<-stuck // on SessionOpened
	// 20 events follow: the newest 4 wait, the oldest 16 are dropped.
	for range 10 {
		term, err := client.Lock("job").Acquire(context.Background())
		if err != nil {
			panic(err)
		}
		_ = term.Close()
	}
	close(gate)
	fmt.Println("dropped:", <-dropped)
	_ = client.Close(context.Background())
	// Output: dropped: 16
}
