package fxsimba_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	"github.com/simba-go/simba/fxsimba"
	"go.uber.org/fx"
)

// run starts app, waits for ready, and stops it.
func run(app *fx.App, ready <-chan struct{}) {
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		fmt.Println("start:", err)
		return
	}
	<-ready
	if err := app.Stop(ctx); err != nil {
		fmt.Println("stop:", err)
	}
}

// The option form: fxsimba.Options builds the client from the graph's
// backend and runs the leader work; stopping the app hands the lease over
// (the work exits first) and closes the session.
func ExampleOptions() {
	store := memory.New() // a real service provides its backend: simbaredis.Open, simbapg.Open, simbamysql.Open, ...
	led := make(chan struct{})
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func() simba.Backend { return store.Connect() }),
		fxsimba.Options,
		fxsimba.AsLeaderWork("report", func(ctx context.Context, t *simba.Term) error {
			fmt.Println("leading report with token", t.Token())
			close(led)
			<-ctx.Done() // the term ended, or the app is stopping
			return nil
		}),
	)
	run(app, led)
	_, _, held := store.Owner("report")
	fmt.Println("held after the stop:", held)
	// Output:
	// leading report with token 1
	// held after the stop: false
}

// The constructor form: fx.Provide(fxsimba.Module) adds the *simba.Client
// to the graph, for the service's own constructors to use.
func ExampleModule() {
	done := make(chan struct{})
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func() simba.Backend { return memory.New().Connect() }),
		fx.Supply(simba.Config{LeaseDuration: 9 * time.Second}),
		fx.Provide(fxsimba.Module),
		fx.Invoke(func(c *simba.Client) {
			fmt.Println("renew interval:", c.Config().RenewInterval)
			close(done)
		}),
	)
	run(app, done)
	// Output: renew interval: 3s
}

// A schedule runs on the leader of its lease only, every period.
func ExampleAsScheduled() {
	var once sync.Once
	ticked := make(chan struct{})
	runs := 0
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func() simba.Backend { return memory.New().Connect() }),
		fxsimba.Options,
		fxsimba.AsScheduled("purge", 10*time.Millisecond, func(context.Context, *simba.Term) error {
			if runs++; runs == 3 {
				once.Do(func() { close(ticked) })
			}
			return nil
		}),
	)
	run(app, ticked)
	fmt.Println("purged at least 3 times:", runs >= 3)
	// Output: purged at least 3 times: true
}

// Partitioned work: with one node, it holds every partition.
func ExampleAsPartitioned() {
	var mu sync.Mutex
	var held []int
	all := make(chan struct{})
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func() simba.Backend { return memory.New().Connect() }),
		fxsimba.Options,
		fxsimba.AsPartitioned("shards", 3, func(ctx context.Context, partition int, _ *simba.Term) error {
			mu.Lock()
			held = append(held, partition)
			if len(held) == 3 {
				close(all)
			}
			mu.Unlock()
			<-ctx.Done()
			return nil
		}),
	)
	run(app, all)
	slices.Sort(held)
	fmt.Println("partitions:", held)
	// Output: partitions: [0 1 2]
}

// Work whose function needs values of the graph comes from a constructor
// of the service, annotated into the work group.
func ExampleWork() {
	type reports struct{ sent chan struct{} } // stands for a dependency of the work
	r := &reports{sent: make(chan struct{})}
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func() simba.Backend { return memory.New().Connect() }),
		fx.Supply(r),
		fxsimba.Options,
		fx.Provide(fx.Annotate(
			func(r *reports) fxsimba.Work {
				return fxsimba.LeaderWork("daily-report", func(context.Context, *simba.Term) error {
					fmt.Println("report sent")
					close(r.sent)
					return nil // done: the node stops leading daily-report, the app goes on
				})
			},
			fx.ResultTags(`group:"simba.work"`),
		)),
	)
	run(app, r.sent)
	// Output: report sent
}

// Event listeners join the "simba.listeners" value group; each gets every
// event of the client.
func ExampleAsEventListener() {
	var once sync.Once
	opened := make(chan struct{})
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func() simba.Backend { return memory.New().Connect() }),
		fxsimba.Options,
		fxsimba.AsEventListener(func(_ context.Context, e simba.Event) {
			if e.Kind == simba.EventSessionOpened {
				once.Do(func() {
					fmt.Println(e.Kind)
					close(opened)
				})
			}
		}),
	)
	run(app, opened)
	// Output: SessionOpened
}

// The session timing comes from SIMBA_SESSION_* variables; a value out of
// bounds fails the app at start, naming the variable and the bound.
func ExampleConfigFromEnv() {
	app := fx.New(
		fx.Provide(fxsimba.ConfigFromEnv),
		fx.Provide(func() simba.Backend { return memory.New().Connect() }),
		fxsimba.Options,
	)
	app.Run()
}

// ConfigFromLookup reads the same variables from any source.
func ExampleConfigFromLookup() {
	vars := map[string]string{
		fxsimba.EnvLeaseDuration: "10s",
		fxsimba.EnvRenewInterval: "6s",
	}
	_, err := fxsimba.ConfigFromLookup(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	fmt.Println(err)
	// Output: fxsimba: SIMBA_SESSION_RENEW_INTERVAL=6s: simba: config RenewInterval: 6s: two keep-alives must fit in LeaseDuration 10s
}
