package fxsimba_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	"github.com/simba-go/simba/fxsimba"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
)

// testConfig is the timing of every test node: short, so that real-time
// tests stay quick; in a synctest bubble time is fake anyway.
var testConfig = simba.Config{LeaseDuration: 3 * time.Second, RenewInterval: time.Second}

// node returns the options of one node of store: its own connection to the
// store and the test timing.
func node(store *memory.Server) fx.Option {
	return nodeOn(store.Connect())
}

func nodeOn(b simba.Backend) fx.Option {
	return fx.Options(
		fx.Provide(func() simba.Backend { return b }),
		fx.Supply(testConfig),
	)
}

// logTo returns an option supplying a logger that writes into buf.
func logTo(buf *syncBuffer) fx.Option {
	return fx.Supply(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventually polls cond until it holds, for at most d. It runs in a
// synctest bubble, and lets every goroutine of the bubble settle before
// each check.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for synctest.Wait(); !cond(); synctest.Wait() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// owns reports whether c's session owns the lease name in store.
func owns(store *memory.Server, c *simba.Client, name string) bool {
	id, _, ok := store.Owner(name)
	return ok && id != "" && id == c.Snapshot().Session.ID
}

// blockUntilDone is leader work that runs until its term ends.
func blockUntilDone(ctx context.Context, _ *simba.Term) error {
	<-ctx.Done()
	return nil
}

// runs counts the runs of a work function and how many overlap.
type runs struct {
	started, running, maxRunning atomic.Int32
}

func (r *runs) work(ctx context.Context, _ *simba.Term) error {
	r.started.Add(1)
	n := r.running.Add(1)
	for {
		m := r.maxRunning.Load()
		if n <= m || r.maxRunning.CompareAndSwap(m, n) {
			break
		}
	}
	defer r.running.Add(-1)
	<-ctx.Done()
	return nil
}

func TestNoWorkRunsBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var r runs
		var c *simba.Client
		app := fxtest.New(t, node(store), fxsimba.Options, fxsimba.AsLeaderWork("report", r.work), fx.Populate(&c))

		time.Sleep(time.Minute)
		if got := r.started.Load(); got != 0 {
			t.Fatalf("the work ran %d times before the app started", got)
		}
		if got := store.Calls()[memory.OpAcquire]; got != 0 {
			t.Fatalf("%d acquires before the app started", got)
		}

		app.RequireStart()
		eventually(t, testConfig.LeaseDuration, "the work runs once the app started", func() bool { return r.started.Load() == 1 })
		if !owns(store, c, "report") {
			t.Fatal("the app runs the work without owning its lease")
		}
		app.RequireStop()
		if ids := store.Sessions(); len(ids) != 0 {
			t.Fatalf("sessions left after the stop: %v", ids)
		}
		if c.Snapshot().Session.Status != simba.StatusClosed {
			t.Fatalf("the client is %v after the stop, want CLOSED", c.Snapshot().Session.Status)
		}
	})
}

func TestStartDoesNotWaitForTheBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memory.New().Connect()
		conn.Stall() // every call black-holed until its context ends
		app := fxtest.New(t, nodeOn(conn), fxsimba.Options, fxsimba.AsLeaderWork("report", blockUntilDone))
		begin := time.Now()
		app.RequireStart()
		if took := time.Since(begin); took != 0 {
			t.Fatalf("start took %v with an unreachable backend, want no time", took)
		}
		begin = time.Now()
		app.RequireStop()
		if took := time.Since(begin); took > testConfig.RenewInterval {
			t.Fatalf("stop took %v with an unreachable backend", took)
		}
	})
}

// opLog is a backend that notes the releases and the session closes it
// passes on, in one sequence with the notes of the test.
type opLog struct {
	simba.Backend
	mu  sync.Mutex
	ops []string
}

func (l *opLog) note(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
}

func (l *opLog) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

func (l *opLog) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	l.note("release " + name)
	return l.Backend.Release(ctx, s, name, token)
}

func (l *opLog) CloseSession(ctx context.Context, s simba.SessionID) error {
	l.note("close session")
	return l.Backend.CloseSession(ctx, s)
}

func TestStopHandsTheWorkOverInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		ops := &opLog{Backend: store.Connect()}
		interrupted, exit := make(chan struct{}), make(chan struct{})
		work := func(ctx context.Context, _ *simba.Term) error {
			<-ctx.Done()
			ops.note("work interrupted")
			close(interrupted)
			<-exit
			ops.note("work exited")
			return nil
		}
		var c *simba.Client
		app := fxtest.New(t, nodeOn(ops), fxsimba.Options, fxsimba.AsLeaderWork("report", work), fx.Populate(&c))
		app.RequireStart()
		eventually(t, testConfig.LeaseDuration, "the app leads", func() bool { return owns(store, c, "report") })

		stopped := make(chan error, 1)
		go func() { stopped <- app.Stop(context.Background()) }()
		<-interrupted
		// The work is still exiting: the lease must still be held (R-HO-1),
		// and the stop must not have returned.
		time.Sleep(500 * time.Millisecond)
		if !owns(store, c, "report") {
			t.Fatal("the lease was released while the work was still exiting")
		}
		select {
		case err := <-stopped:
			t.Fatalf("the stop returned (%v) while the work was still exiting", err)
		default:
		}
		close(exit)
		if err := <-stopped; err != nil {
			t.Fatalf("stop: %v", err)
		}
		ops.note("stop returned")

		want := []string{"work interrupted", "work exited", "release report", "close session", "stop returned"}
		if got := ops.seen(); !slices.Equal(got, want) {
			t.Fatalf("the stop went\n  %q\nwant\n  %q", got, want)
		}
		if _, _, ok := store.Owner("report"); ok {
			t.Fatal("the lease is still owned after the stop")
		}
	})
}

func TestStopWaitsForStubbornWorkOnlyUntilTheTermsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		work := func(context.Context, *simba.Term) error {
			time.Sleep(time.Hour) // ignores the interruption
			return nil
		}
		var c *simba.Client
		app := fxtest.New(t, node(store), fxsimba.Options, fxsimba.AsLeaderWork("report", work), fx.Populate(&c))
		app.RequireStart()
		var term *simba.Term
		eventually(t, testConfig.LeaseDuration, "the app leads", func() bool {
			term = c.Election("report").Term()
			return term != nil && owns(store, c, "report")
		})
		remaining := term.Remaining()

		begin := time.Now()
		app.RequireStop()
		if took := time.Since(begin); took != remaining {
			t.Fatalf("the stop took %v, want the %v left to the term", took, remaining)
		}
		if _, _, ok := store.Owner("report"); ok {
			t.Fatal("the lease is still owned after the stop")
		}
		time.Sleep(time.Hour) // the work returns at last
	})
}

func TestStopIsBoundedByItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		work := func(context.Context, *simba.Term) error {
			time.Sleep(time.Hour)
			return nil
		}
		var c *simba.Client
		app := fxtest.New(t, node(store), fxsimba.Options, fxsimba.AsLeaderWork("report", work), fx.Populate(&c))
		app.RequireStart()
		eventually(t, testConfig.LeaseDuration, "the app leads", func() bool { return owns(store, c, "report") })

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := app.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stop: %v, want a deadline error", err)
		}
		// The handover goes on in the background and ends at the term's
		// deadline: the lease and the session are freed.
		time.Sleep(testConfig.LeaseDuration)
		if ids := store.Sessions(); len(ids) != 0 {
			t.Fatalf("sessions left after the stop: %v", ids)
		}
		time.Sleep(time.Hour) // the work returns at last
	})
}

func TestFailedWorkShutsTheAppDown(t *testing.T) {
	// Real time: waiting for the shutdown signal starts fx's signal relay,
	// which must not start inside a synctest bubble.
	store := memory.New()
	var logs syncBuffer
	boom := errors.New("boom")
	app := fxtest.New(t, node(store), logTo(&logs), fxsimba.Options,
		fxsimba.AsLeaderWork("report", func(context.Context, *simba.Term) error { return boom }))
	app.RequireStart()
	defer app.RequireStop()
	select {
	case sig := <-app.Wait():
		if sig.ExitCode != fxsimba.ExitCode {
			t.Fatalf("exit code %d, want %d", sig.ExitCode, fxsimba.ExitCode)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the app was not shut down")
	}
	if got := logs.String(); !strings.Contains(got, "shutting the app down") || !strings.Contains(got, "boom") {
		t.Fatalf("the failure was not logged:\n%s", got)
	}
}

func TestFailedWorkWithStepDownOnErrorKeepsTheAppRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var logs syncBuffer
		var n atomic.Int32
		work := func(ctx context.Context, _ *simba.Term) error {
			if n.Add(1) == 1 {
				return errors.New("boom")
			}
			<-ctx.Done()
			return nil
		}
		app := fxtest.New(t, node(store), logTo(&logs), fxsimba.Options,
			fxsimba.AsLeaderWork("report", work, simba.StepDownOnError(time.Second)))
		app.RequireStart()
		eventually(t, 3*testConfig.LeaseDuration, "the work runs again after its failure", func() bool { return n.Load() == 2 })
		app.RequireStop()
		if got := logs.String(); strings.Contains(got, "shutting the app down") {
			t.Fatalf("the app was shut down:\n%s", got)
		}
	})
}

func TestFinishedWorkKeepsTheAppRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var logs syncBuffer
		done := make(chan struct{})
		work := func(context.Context, *simba.Term) error {
			close(done)
			return nil
		}
		var c *simba.Client
		app := fxtest.New(t, node(store), logTo(&logs), fxsimba.Options,
			fxsimba.AsLeaderWork("migrate", work), fx.Populate(&c))
		app.RequireStart()
		<-done
		synctest.Wait()
		if _, _, ok := store.Owner("migrate"); ok {
			t.Fatal("the lease is still held after the work finished")
		}
		if got := logs.String(); !strings.Contains(got, "leader work finished") || strings.Contains(got, "shutting the app down") {
			t.Fatalf("want the end of the work logged, and no shutdown:\n%s", got)
		}
		if s := c.Snapshot().Session.Status; s != simba.StatusLive {
			t.Fatalf("the session is %v, want LIVE", s)
		}
		app.RequireStop()
	})
}

func TestTwoAppsContendForOneLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var ra, rb runs
		var ca, cb *simba.Client
		a := fxtest.New(t, node(store), fxsimba.Options, fxsimba.AsLeaderWork("report", ra.work), fx.Populate(&ca))
		b := fxtest.New(t, node(store), fxsimba.Options, fxsimba.AsLeaderWork("report", rb.work), fx.Populate(&cb))
		a.RequireStart()
		eventually(t, testConfig.LeaseDuration, "A leads", func() bool { return owns(store, ca, "report") && ra.running.Load() == 1 })
		b.RequireStart()
		time.Sleep(5 * testConfig.LeaseDuration)
		if rb.started.Load() != 0 || !owns(store, ca, "report") {
			t.Fatal("B ran the work while A led")
		}

		a.RequireStop()
		eventually(t, testConfig.RenewInterval, "B takes over", func() bool { return owns(store, cb, "report") && rb.running.Load() == 1 })
		b.RequireStop()

		if ra.started.Load() != 1 || rb.started.Load() != 1 {
			t.Fatalf("A ran %d times and B %d times, want once each", ra.started.Load(), rb.started.Load())
		}
		if ra.maxRunning.Load() != 1 || rb.maxRunning.Load() != 1 {
			t.Fatal("a work ran twice at once")
		}
	})
}

func TestScheduledAndPartitionedWorkSpreadOverTwoApps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		type app struct {
			app   *fxtest.App
			c     *simba.Client
			ticks atomic.Int32
		}
		newApp := func() *app {
			a := &app{}
			tick := func(context.Context, *simba.Term) error { a.ticks.Add(1); return nil }
			part := func(ctx context.Context, _ int, _ *simba.Term) error { <-ctx.Done(); return nil }
			a.app = fxtest.New(t, node(store), fxsimba.Options,
				fxsimba.AsScheduled("tick", 100*time.Millisecond, tick),
				fxsimba.AsPartitioned("jobs", 4, part),
				fx.Populate(&a.c))
			return a
		}
		held := func(a *app) int {
			n := 0
			for i := range 4 {
				if owns(store, a.c, "jobs."+strconv.Itoa(i)) {
					n++
				}
			}
			return n
		}
		a, b := newApp(), newApp()
		a.app.RequireStart()
		eventually(t, testConfig.LeaseDuration, "A leads tick", func() bool { return owns(store, a.c, "tick") })
		b.app.RequireStart()
		eventually(t, 10*testConfig.LeaseDuration, "the partitions spread evenly", func() bool { return held(a) == 2 && held(b) == 2 })
		if b.ticks.Load() != 0 {
			t.Fatalf("B ran the schedule %d times while A led it", b.ticks.Load())
		}
		synctest.Wait() // every run due by now has run
		before := a.ticks.Load()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := a.ticks.Load() - before; got != 10 {
			t.Fatalf("A ran the schedule %d times in 1s, want 10", got)
		}

		a.app.RequireStop()
		eventually(t, 10*testConfig.LeaseDuration, "B takes everything over", func() bool {
			return held(b) == 4 && owns(store, b.c, "tick") && b.ticks.Load() > 0
		})
		b.app.RequireStop()
	})
}

func TestEventListeners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var logs syncBuffer
		var named, plain atomic.Int32
		opened := func(counter *atomic.Int32) func(context.Context, simba.Event) {
			return func(_ context.Context, e simba.Event) {
				if e.Kind == simba.EventSessionOpened {
					counter.Add(1)
				}
			}
		}
		app := fxtest.New(t, node(store), logTo(&logs), fxsimba.Options,
			fxsimba.AsEventListener(func(context.Context, simba.Event) { panic("listener bug") }),
			fxsimba.AsEventListener(opened(&named)),
			// A listener of the plain function type, from a constructor.
			fx.Provide(fx.Annotate(func() func(context.Context, simba.Event) { return opened(&plain) },
				fx.ResultTags(`group:"simba.listeners"`))),
		)
		app.RequireStart()
		eventually(t, testConfig.LeaseDuration, "both listeners hear of the session", func() bool {
			return named.Load() == 1 && plain.Load() == 1
		})
		app.RequireStop()
		if got := logs.String(); !strings.Contains(got, "event listener panicked") {
			t.Fatalf("the panic was not logged:\n%s", got)
		}
	})
}

// The constructor form: fx.Provide(fxsimba.Module), with work from an
// option helper and from a constructor of the user's.
func TestConstructorForm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var helper, ctor runs
		var c *simba.Client
		app := fxtest.New(t, node(store),
			fx.Provide(fxsimba.Module),
			fxsimba.AsLeaderWork("helper", helper.work),
			fx.Module("billing",
				fx.Provide(fx.Annotate(
					func() fxsimba.Work { return fxsimba.LeaderWork("from-ctor", ctor.work) },
					fx.ResultTags(`group:"simba.work"`))),
			),
			fx.Populate(&c),
		)
		app.RequireStart()
		eventually(t, testConfig.LeaseDuration, "both works run", func() bool {
			return helper.running.Load() == 1 && ctor.running.Load() == 1
		})
		app.RequireStop()
	})
}

func TestBadGraphFailsAtNew(t *testing.T) {
	fn := func(context.Context, *simba.Term) error { return nil }
	pfn := func(context.Context, int, *simba.Term) error { return nil }
	backend := func() simba.Backend { return memory.New().Connect() }
	base := fx.Options(fx.Provide(backend), fxsimba.Options)
	var configErr *simba.ConfigError
	tests := []struct {
		name   string
		give   []fx.Option
		env    map[string]string
		want   string // in the message
		wantIs error
		wantAs any
	}{
		{name: "no backend", give: []fx.Option{fxsimba.Options}, want: "missing type: simba.Backend"},
		{name: "two backends", give: []fx.Option{base, fx.Provide(backend)}, want: "already provided"},
		{name: "nil backend", give: []fx.Option{fx.Provide(func() simba.Backend { return nil }), fxsimba.Options},
			want: "nil simba.Backend", wantIs: simba.ErrInvalidArgument},
		{name: "work without the module", give: []fx.Option{fxsimba.AsLeaderWork("report", fn)},
			want: "missing type: *simba.Client"},
		{name: "the option passed to fx.Provide", give: []fx.Option{fx.Provide(backend), fx.Provide(fxsimba.Options)},
			want: "fx.Option should be passed to fx.New directly"},
		{name: "module twice", give: []fx.Option{base, fx.Provide(fxsimba.Module)}, want: "already provided"},
		{name: "nil work function", give: []fx.Option{base, fxsimba.AsLeaderWork("report", nil)},
			want: `leader work "report": nil work function`, wantIs: simba.ErrInvalidArgument},
		{name: "nil partition function", give: []fx.Option{base, fxsimba.AsPartitioned("jobs", 3, nil)},
			want: "nil work function", wantIs: simba.ErrInvalidArgument},
		{name: "invalid name", give: []fx.Option{base, fxsimba.AsScheduled("bad name", time.Second, fn)},
			want: `invalid lease name "bad name"`, wantIs: simba.ErrInvalidName},
		{name: "no period", give: []fx.Option{base, fxsimba.AsScheduled("tick", 0, fn)},
			want: "period must be positive", wantIs: simba.ErrInvalidArgument},
		{name: "too many partitions", give: []fx.Option{base, fxsimba.AsPartitioned("jobs", simba.MaxPartitions+1, pfn)},
			want: "want 1 to 4096 partitions", wantIs: simba.ErrInvalidArgument},
		{name: "partition names too long", give: []fx.Option{base, fxsimba.AsPartitioned(strings.Repeat("j", 127), 10, pfn)},
			want: "partition names would be too long", wantIs: simba.ErrInvalidName},
		{name: "two works on one lease", give: []fx.Option{base, fxsimba.AsLeaderWork("report", fn), fxsimba.AsScheduled("report", time.Second, fn)},
			want: `both use the lease "report"`, wantIs: simba.ErrInvalidArgument},
		{name: "work on a partition's lease", give: []fx.Option{base, fxsimba.AsPartitioned("jobs", 4, pfn), fxsimba.AsLeaderWork("jobs.2", fn)},
			want: `both use the lease "jobs.2"`, wantIs: simba.ErrInvalidArgument},
		{name: "empty work", give: []fx.Option{base, fx.Supply(fx.Annotated{Group: fxsimba.WorkGroup, Target: fxsimba.Work{}})},
			want: "is empty", wantIs: simba.ErrInvalidArgument},
		{name: "invalid work from a constructor", give: []fx.Option{base, fx.Provide(fx.Annotate(
			func() fxsimba.Work { return fxsimba.LeaderWork("", fn) }, fx.ResultTags(`group:"simba.work"`)))},
			want: "empty", wantIs: simba.ErrInvalidName},
		{name: "nil event listener", give: []fx.Option{base, fxsimba.AsEventListener(nil)},
			want: "nil event listener", wantIs: simba.ErrInvalidArgument},
		{name: "nil event listener in the group", give: []fx.Option{base,
			fx.Supply(fx.Annotated{Group: fxsimba.ListenerGroup, Target: fxsimba.EventListener(nil)})},
			want: "is nil", wantIs: simba.ErrInvalidArgument},
		{name: "config out of bounds", give: []fx.Option{base,
			fx.Supply(simba.Config{LeaseDuration: 10 * time.Second, RenewInterval: 8 * time.Second})},
			want: "two keep-alives must fit", wantIs: simba.ErrInvalidConfig, wantAs: &configErr},
		{name: "config from the environment out of bounds", give: []fx.Option{base, fx.Provide(fxsimba.ConfigFromEnv)},
			env:    map[string]string{fxsimba.EnvLeaseDuration: "10s", fxsimba.EnvRenewInterval: "8s"},
			want:   "SIMBA_SESSION_RENEW_INTERVAL=8s: simba: config RenewInterval: 8s: two keep-alives must fit in LeaseDuration 10s",
			wantAs: &configErr},
		{name: "config from the environment that does not parse", give: []fx.Option{base, fx.Provide(fxsimba.ConfigFromEnv)},
			env:  map[string]string{fxsimba.EnvDrift: "1%"},
			want: `SIMBA_SESSION_DRIFT="1%"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			app := fx.New(append(tt.give, fx.NopLogger)...)
			err := app.Err()
			if err == nil {
				_ = app.Stop(context.Background())
				t.Fatal("fx.New accepted the graph")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q does not match %v", err, tt.wantIs)
			}
			if tt.wantAs != nil && !errors.As(err, tt.wantAs) {
				t.Errorf("error %q is not a %T", err, tt.wantAs)
			}
			// Start fails with the same error (dig's errors do not compare).
			if serr := app.Start(context.Background()); serr == nil || serr.Error() != err.Error() {
				t.Errorf("Start returned %v, want the error of New", serr)
			}
		})
	}
}

// noSessionFor fails the test when store has a session at any point
// within d of real time (the client's loop would open one within a
// millisecond of the memory store).
func noSessionFor(t *testing.T, store *memory.Server, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ids := store.Sessions(); len(ids) != 0 {
			t.Fatalf("sessions of an app that never started: %v", ids)
		}
	}
}

// shutdowner is an fx.Shutdowner outside fx.
type shutdowner struct{}

func (shutdowner) Shutdown(...fx.ShutdownOption) error { return nil }

// TestModuleOutsideFxRefusesMissingParams: Module called with a Params
// literal that lacks the Lifecycle, the Shutdowner or the Backend returns
// an error wrapping simba.ErrInvalidArgument, not a panic now or, for the
// Shutdowner, in a work's goroutine when the work fails.
func TestModuleOutsideFxRefusesMissingParams(t *testing.T) {
	backend := memory.New().Connect()
	tests := []struct {
		name string
		give fxsimba.Params
		want string
	}{
		{name: "no lifecycle", give: fxsimba.Params{Shutdowner: shutdowner{}, Backend: backend}, want: "Params.Lifecycle is nil"},
		{name: "backend only", give: fxsimba.Params{Backend: backend}, want: "Params.Lifecycle is nil"},
		{name: "no shutdowner", give: fxsimba.Params{Lifecycle: fxtest.NewLifecycle(t), Backend: backend}, want: "Params.Shutdowner is nil"},
		{name: "no backend", give: fxsimba.Params{Lifecycle: fxtest.NewLifecycle(t), Shutdowner: shutdowner{}}, want: "nil simba.Backend"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := fxsimba.Module(tt.give)
			if err == nil {
				_ = res.Client.Close(context.Background())
				t.Fatal("Module accepted the params")
			}
			if !strings.Contains(err.Error(), tt.want) || !errors.Is(err, simba.ErrInvalidArgument) {
				t.Errorf("error %q, want one saying %q that matches simba.ErrInvalidArgument", err, tt.want)
			}
			if res.Client != nil {
				t.Error("Module returned a client with its error")
			}
		})
	}
}

// A session lives only between a successful start and the stop: an app
// that fails before Simba's start hook ran (at fx.New, or in a start hook
// that runs before Simba's) opens none and leaves nothing running.
func TestAppThatNeverStartsOpensNoSession(t *testing.T) {
	failing := errors.New("a component fails")
	tests := []struct {
		name  string
		give  func(store *memory.Server) fx.Option
		start bool // fx.New succeeds, Start fails
	}{
		{name: "a later invocation fails at fx.New", give: func(*memory.Server) fx.Option {
			return fx.Invoke(func(*simba.Client) error { return failing })
		}},
		{name: "a later constructor fails at fx.New", give: func(*memory.Server) fx.Option {
			type later struct{}
			return fx.Options(
				fx.Provide(func(*simba.Client) (later, error) { return later{}, failing }),
				fx.Invoke(func(later) {}))
		}},
		{name: "the backend's start hook fails", start: true, give: func(store *memory.Server) fx.Option {
			// The backend's constructor registers its hook before Module does,
			// so that hook runs first and Simba's never does.
			return fx.Decorate(func(lc fx.Lifecycle, b simba.Backend) simba.Backend {
				lc.Append(fx.Hook{OnStart: func(context.Context) error { return failing }})
				return b
			})
		}},
		{name: "a later start hook fails", start: true, give: func(*memory.Server) fx.Option {
			return fx.Invoke(func(lc fx.Lifecycle, _ *simba.Client) {
				lc.Append(fx.Hook{OnStart: func(context.Context) error { return failing }})
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memory.New()
			var c *simba.Client
			app := fx.New(node(store), fxsimba.Options, fx.Populate(&c), tt.give(store), fx.NopLogger)
			if c != nil {
				t.Cleanup(func() { _ = c.Close(context.Background()) }) // so that a leak fails this test only
			}
			err := app.Err()
			if tt.start {
				if err != nil {
					t.Fatalf("fx.New: %v", err)
				}
				err = app.Start(context.Background())
			}
			if !errors.Is(err, failing) {
				t.Fatalf("the app failed with %v, want %v", err, failing)
			}
			noSessionFor(t, store, 200*time.Millisecond)
			goleak.VerifyNone(t) // nothing of the client runs
		})
	}
}

// Each listener of the group has a queue of its own: one that blocks
// delays no other.
func TestBlockedEventListenerDelaysNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var opened atomic.Int32
		app := fxtest.New(t, node(memory.New()), fxsimba.Options,
			fxsimba.AsEventListener(func(context.Context, simba.Event) { <-gate }),
			fxsimba.AsEventListener(func(_ context.Context, e simba.Event) {
				if e.Kind == simba.EventSessionOpened {
					opened.Add(1)
				}
			}),
		)
		app.RequireStart()
		eventually(t, testConfig.LeaseDuration, "the free listener hears of the session", func() bool { return opened.Load() == 1 })
		close(gate)
		app.RequireStop()
	})
}

// A lock taken in an fx.Invoke, before the app starts, fails fx.New at
// once with simba.ErrClientNotStarted instead of waiting for a session
// that opens only at the start; taken in a start hook registered after
// Simba's, it is won.
func TestLocksBeforeAndAfterTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		early := fx.New(node(store), fxsimba.Options, fx.NopLogger, fx.Invoke(func(c *simba.Client) error {
			_, err := c.Lock("early").Acquire(context.Background())
			return err
		}))
		if err := early.Err(); !errors.Is(err, simba.ErrClientNotStarted) {
			t.Fatalf("fx.New with a lock taken in an invocation: %v, want ErrClientNotStarted", err)
		}

		won := make(chan uint64, 1)
		app := fxtest.New(t, node(store), fxsimba.Options, fx.Invoke(func(lc fx.Lifecycle, c *simba.Client) {
			lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
				lt, err := c.Lock("late").Acquire(ctx)
				if err != nil {
					return err
				}
				won <- lt.Token()
				return lt.Release(ctx)
			}})
		}))
		app.RequireStart()
		if tok := <-won; tok == 0 {
			t.Fatal("no token")
		}
		app.RequireStop()
		if ids := store.Sessions(); len(ids) != 0 {
			t.Fatalf("sessions after the stop: %v", ids)
		}
	})
}
