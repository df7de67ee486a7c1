package fxsimba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	simba "github.com/simba-go/simba/core"
	"go.uber.org/fx"
)

// The value groups Module reads.
const (
	// WorkGroup is the value group of the leader work to run: Work values,
	// as AsLeaderWork, AsScheduled and AsPartitioned provide them.
	WorkGroup = "simba.work"

	// ListenerGroup is the value group of the event listeners: values of
	// type EventListener or func(context.Context, simba.Event).
	ListenerGroup = "simba.listeners"
)

// ExitCode is the exit code of an app shut down because a leader work call
// failed while it ran.
const ExitCode = 1

// Params is what Module takes from the graph. The Lifecycle and the
// Shutdowner, which fx provides, and the Backend are required: Module
// returns an error wrapping simba.ErrInvalidArgument when one is nil (as
// when Module is called outside fx with a Params literal). The zero Config
// means the defaults, and a missing Logger means slog.Default for this
// package's own lines and core's quiet default for the client's.
type Params struct {
	fx.In

	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Backend    simba.Backend

	Config simba.Config `optional:"true"`
	Logger *slog.Logger `optional:"true"`

	// Listeners and ListenerFuncs receive every event of the client, each
	// listener from a queue of its own (see EventListener). A listener that
	// panics is logged by the client and gets the next events.
	Listeners     []EventListener                      `group:"simba.listeners"`
	ListenerFuncs []func(context.Context, simba.Event) `group:"simba.listeners"`

	// Work is the leader work to run while the app runs.
	Work []Work `group:"simba.work"`
}

// Result is what Module adds to the graph.
type Result struct {
	fx.Out

	Client *simba.Client
}

// Module is the fx constructor of the Simba client: pass it to fx.Provide.
//
// It checks the listeners and the work of the graph (a nil listener, an
// invalid work, or two works that would use one lease name are errors) and
// builds the client with simba.New and simba.WithDeferredStart: the client
// makes no backend call and runs nothing until the app starts, so an app
// that fails before it starts (a later constructor, invocation or earlier
// start hook fails) leaves no session behind. A config out of bounds fails
// here with a *simba.ConfigError. Each listener is a listener of its own
// of the client, with its own bounded queue (simba.WithEventListener).
//
// Module registers one lifecycle hook. On start it starts the client,
// whose session opens in the background (starting the app does not wait
// for the backend), and runs each work's blocking call (RunWhileLeader,
// Schedule or Group.Run) on a goroutine of its own, with a context
// cancelled on stop; it returns at once. Before the start, in a
// constructor or an fx.Invoke, the client refuses at once every call that
// would contend or ask the backend (Lock.Acquire, Election.Start, Holder
// and the like) with simba.ErrClientNotStarted: take locks in a start
// hook registered after Simba's, or in leader work. On stop it
// cancels that context, waits for every call to return (each call returns
// after the ordered handover of its terms: the work exited, or its term's
// deadline passed, and the lease was released), then closes the client,
// all bounded by the stop context. Since a constructor's hooks run after
// those of its dependencies on start and before them on stop, the backend,
// when its constructor registers a hook to close it, is closed after the
// client.
//
// A work call that returns an error while the app runs is logged and shuts
// the app down with exit code ExitCode (see the package doc). A
// RunWhileLeader work that returns nil has finished: that is logged, and the
// app goes on.
func Module(p Params) (Result, error) {
	if p.Lifecycle == nil {
		return Result{}, fmt.Errorf("fxsimba: Params.Lifecycle is nil: %w", simba.ErrInvalidArgument)
	}
	if p.Shutdowner == nil {
		return Result{}, fmt.Errorf("fxsimba: Params.Shutdowner is nil: %w", simba.ErrInvalidArgument)
	}
	if p.Backend == nil {
		return Result{}, fmt.Errorf("fxsimba: the graph provides a nil simba.Backend: %w", simba.ErrInvalidArgument)
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	listeners := make([]EventListener, 0, len(p.Listeners)+len(p.ListenerFuncs))
	listeners = append(listeners, p.Listeners...)
	for _, fn := range p.ListenerFuncs {
		listeners = append(listeners, fn)
	}
	for i, l := range listeners {
		if l == nil {
			return Result{}, fmt.Errorf("fxsimba: event listener %d of the group %q is nil: %w", i, ListenerGroup, simba.ErrInvalidArgument)
		}
	}
	if err := checkWork(p.Work); err != nil {
		return Result{}, err
	}

	// The session opens at start, not while fx builds the graph: a graph or
	// a start that fails before Simba's hook leaves no session behind.
	opts := []simba.Option{simba.WithConfig(p.Config), simba.WithDeferredStart()}
	if p.Logger != nil {
		opts = append(opts, simba.WithLogger(p.Logger))
	}
	for _, l := range listeners {
		opts = append(opts, simba.WithEventListener(l))
	}
	c, err := simba.New(p.Backend, opts...)
	if err != nil {
		return Result{}, fmt.Errorf("fxsimba: %w", err)
	}
	r := &runner{client: c, work: p.Work, log: log, shut: p.Shutdowner}
	p.Lifecycle.Append(fx.Hook{OnStart: r.start, OnStop: r.stop})
	return Result{Client: c}, nil
}

// Options is Module as an fx option: the constructor, in an fx.Module
// named "simba", and an invocation that builds the client even when
// nothing else in the graph asks for it, so that the leader work runs.
// Include it once, instead of fx.Provide(Module), never beside it.
var Options = fx.Module("simba",
	fx.Provide(Module),
	fx.Invoke(requireClient),
)

// requireClient makes fx build the client, and with it start the work.
func requireClient(*simba.Client) {}

// runner runs the leader work of one app and closes its client.
type runner struct {
	client *simba.Client
	work   []Work
	log    *slog.Logger
	shut   fx.Shutdowner

	cancel context.CancelFunc // set by start
	wg     sync.WaitGroup     // one per work call
}

// start starts the client and every work call, and returns at once.
func (r *runner) start(context.Context) error {
	if err := r.client.Start(); err != nil {
		return fmt.Errorf("fxsimba: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for _, w := range r.work {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.run(ctx, w)
		}()
	}
	return nil
}

// run makes w's blocking call and decides what its return means.
func (r *runner) run(ctx context.Context, w Work) {
	err := w.call(ctx, r.client)
	switch {
	case ctx.Err() != nil:
		// The app is stopping: the call returned after its handover.
		if err != nil {
			r.log.Error("fxsimba: leader work failed while the app stopped", "work", w.String(), "err", err)
		}
	case err != nil:
		r.log.Error("fxsimba: leader work failed; shutting the app down", "work", w.String(), "err", err)
		if serr := r.shut.Shutdown(fx.ExitCode(ExitCode)); serr != nil {
			r.log.Error("fxsimba: shutting the app down", "err", serr)
		}
	default:
		r.log.Info("fxsimba: leader work finished", "work", w.String())
	}
}

// stop cancels every work call, waits for them to return, then closes the
// client, bounded by ctx.
func (r *runner) stop(ctx context.Context) error {
	if r.cancel != nil {
		r.cancel()
	}
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("fxsimba: leader work still running at the end of the stop timeout: %w", ctx.Err())
	}
	if cerr := r.client.Close(ctx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("fxsimba: close the client: %w", cerr))
	}
	return err
}
