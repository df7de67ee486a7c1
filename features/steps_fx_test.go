package features

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	"github.com/simba-go/simba/fxsimba"
	"go.uber.org/fx"
)

// fxApp is the fx app of one node.
type fxApp struct {
	extra   []fx.Option // what the steps declared: work, listeners
	app     *fx.App     // nil until built
	started bool
	err     error         // the error of fx.New, for a step that expects one
	built   time.Duration // how long fx.New took

	// The lock a start hook of the app took, and its error.
	hookLock *simba.LockTerm
	hookErr  error

	stopOnce sync.Once
	stopErr  error
}

// fxApps holds the fx app of every fx node of the running scenarios.
var fxApps = struct {
	sync.Mutex
	of map[*node]*fxApp
}{of: make(map[*node]*fxApp)}

// fxNode returns the fx node called name and its app, adding the node to
// the scenario on first use: connected, but without a client until its app
// is built.
func (w *world) fxNode(name string) (*node, *fxApp, error) {
	if n, ok := w.nodes[name]; ok {
		fxApps.Lock()
		a := fxApps.of[n]
		fxApps.Unlock()
		if a == nil {
			return nil, nil, fmt.Errorf("features: node %s is connected, but not as an fx app", name)
		}
		return n, a, nil
	}
	n, err := w.connectBare(name)
	if err != nil {
		return nil, nil, err
	}
	a := &fxApp{}
	fxApps.Lock()
	fxApps.of[n] = a
	fxApps.Unlock()
	context.AfterFunc(w.ctx, func() {
		fxApps.Lock()
		delete(fxApps.of, n)
		fxApps.Unlock()
	})
	return n, a, nil
}

// connectBare adds node name to the scenario like connect does, but
// builds no client: the node's fx app builds it.
func (w *world) connectBare(name string) (*node, error) {
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	nb, err := w.env.connect(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("features: connect node %s to %s: %w", name, w.env.name, err)
	}
	rec, backend := newRecorder(nb.backend)
	n := &node{
		w: w, name: name, timing: w.timing,
		rec: rec, backend: backend, conn: nb.conn, link: nb.link, close: nb.close,
		events:    &eventLog{},
		logs:      &logCapture{},
		listeners: make(map[string]*listener),
		works:     make(map[string]*work),
		schedules: make(map[string]*schedule),
		groups:    make(map[string][]*groupRun),
		locks:     make(map[string][]*simba.LockTerm),
		acqs:      make(map[string]*acquisition),
		released:  make(map[*simba.LockTerm]bool),
		marks:     make(map[string]time.Time),
		holds:     make(map[string]*heldReply),
	}
	w.nodes[name] = n
	return n, nil
}

// declare adds an option to the fx app of node name, before it is built.
func (w *world) declare(name string, add func(n *node) (fx.Option, error)) error {
	n, a, err := w.fxNode(name)
	if err != nil {
		return err
	}
	if a.app != nil {
		return fmt.Errorf("features: node %s's fx app is already built", name)
	}
	opt, err := add(n)
	if err != nil {
		return err
	}
	a.extra = append(a.extra, opt)
	return nil
}

func (w *world) fxLeaderWork(name, lease, what string) error {
	return w.declare(name, func(n *node) (fx.Option, error) {
		l := w.name(lease)
		if _, ok := n.works[l]; ok {
			return nil, fmt.Errorf("features: node %s already runs work for %s", name, lease)
		}
		wk, err := w.workThat(n, what)
		if err != nil {
			return nil, err
		}
		wk.done = make(chan struct{})
		n.works[l] = wk
		return fxsimba.AsLeaderWork(l, wk.fn), nil
	})
}

func (w *world) fxSchedules(name, lease, every string) error {
	return w.declare(name, func(n *node) (fx.Option, error) {
		l := w.name(lease)
		period, err := n.dur(every)
		if err != nil {
			return nil, err
		}
		s := &schedule{period: period}
		n.schedules[l] = s
		return fxsimba.AsScheduled(l, period, s.fn), nil
	})
}

func (w *world) fxGroup(name, group string, parts int) error {
	return w.declare(name, func(n *node) (fx.Option, error) {
		g := w.name(group)
		// The app, not the step, ends the group: cancel does nothing, done
		// closes when the app stops.
		gr := &groupRun{n: parts, cancel: func() {}, done: make(chan struct{})}
		n.groups[g] = append(n.groups[g], gr)
		return fxsimba.AsPartitioned(g, parts, gr.fn), nil
	})
}

func (w *world) fxPanickingListener(name string) error {
	return w.declare(name, func(*node) (fx.Option, error) {
		return fxsimba.AsEventListener(func(context.Context, simba.Event) {
			panic("features: a listener that panics on every event")
		}), nil
	})
}

// fxTakesLock declares, in the fx app of node name, an fx.Invoke that
// takes the lock lease: in the invocation itself (before the app starts),
// or in a start hook it registers, which runs after Simba's. Either waits
// at most one lease duration.
func (w *world) fxTakesLock(name, lease, where string) error {
	_, a, err := w.fxNode(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	return w.declare(name, func(n *node) (fx.Option, error) {
		acquire := func(c *simba.Client) (*simba.LockTerm, error) {
			ctx, cancel := context.WithTimeout(context.Background(), w.lease(n.timing))
			defer cancel()
			return c.Lock(l).Acquire(ctx)
		}
		if where == "in an invocation" {
			return fx.Invoke(func(c *simba.Client) error {
				_, err := acquire(c)
				return err
			}), nil
		}
		return fx.Invoke(func(lc fx.Lifecycle, c *simba.Client) {
			lc.Append(fx.Hook{OnStart: func(context.Context) error {
				a.hookLock, a.hookErr = acquire(c)
				return a.hookErr
			}})
		}), nil
	})
}

// fxBuildFails builds the fx app of node name and expects fx.New to fail
// at once, within one renew interval, with an error matching errName.
func (w *world) fxBuildFails(name, errName string) error {
	n, a, err := w.fxNode(name)
	if err != nil {
		return err
	}
	if err := w.build(n, a, fx.Supply(n.timing)); err == nil {
		return fmt.Errorf("node %s's fx app was built", name)
	}
	if err := matches(a.err, errName); err != nil {
		return err
	}
	if renew := resolved(n.timing).RenewInterval; a.built > renew {
		return fmt.Errorf("node %s's fx app failed after %v, want at once (within a renew interval, %v)", name, a.built, renew)
	}
	return nil
}

// fxHookHolds checks that the start hook of node name's app won the lock.
func (w *world) fxHookHolds(name string) error {
	_, a, err := w.fxNode(name)
	if err != nil {
		return err
	}
	if a.hookErr != nil {
		return fmt.Errorf("node %s's start hook took no lock: %w", name, a.hookErr)
	}
	if a.hookLock == nil || !a.hookLock.Valid() {
		return fmt.Errorf("node %s's start hook holds no valid lock", name)
	}
	return nil
}

// build builds the fx app of n, with the session timing config provides.
// The app is stopped when the scenario ends, unless a step stopped it.
func (w *world) build(n *node, a *fxApp, config fx.Option) error {
	var c *simba.Client
	opts := append([]fx.Option{
		fx.NopLogger,
		fx.Provide(func() simba.Backend { return n.backend }),
		fx.Supply(slog.New(n.logs)),
		config,
		fxsimba.AsEventListener(n.events.record),
		fxsimba.Options,
		fx.Populate(&c),
	}, a.extra...)
	start := time.Now()
	app := fx.New(opts...)
	a.built = time.Since(start)
	if err := app.Err(); err != nil {
		a.err = err
		return fmt.Errorf("node %s's fx app: %w", n.name, err)
	}
	a.app = app
	n.client = c
	n.clients = append(n.clients, c)
	n.closed = false
	n.goBackground(func() {
		<-w.ctx.Done()
		_ = a.stop(n)
	})
	return nil
}

// start starts the built app of n.
func (a *fxApp) start(n *node) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.app.StartTimeout())
	defer cancel()
	if err := a.app.Start(ctx); err != nil {
		return fmt.Errorf("node %s's fx app did not start: %w", n.name, err)
	}
	a.started = true
	return nil
}

// stop stops the app of n, once, and closes the done channels of its work.
func (a *fxApp) stop(n *node) error {
	a.stopOnce.Do(func() {
		if a.app == nil || !a.started {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.app.StopTimeout())
		defer cancel()
		a.stopErr = a.app.Stop(ctx)
		for _, wk := range n.works {
			close(wk.done)
		}
		for _, runs := range n.groups {
			for _, gr := range runs {
				close(gr.done)
			}
		}
	})
	return a.stopErr
}

func (w *world) fxStart(list, what string) error {
	for _, name := range nodeList(list) {
		n, a, err := w.fxNode(name)
		if err != nil {
			return err
		}
		if a.app == nil {
			if err := w.build(n, a, fx.Supply(n.timing)); err != nil {
				return err
			}
		}
		if strings.HasPrefix(what, "start") {
			if err := a.start(n); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *world) fxStop(name string) error {
	n, a, err := w.fxNode(name)
	if err != nil {
		return err
	}
	if !a.started {
		return fmt.Errorf("features: node %s's fx app was never started", name)
	}
	n.marks["stop"] = time.Now()
	for l := range n.works {
		if t := n.client.Election(l).Term(); t != nil {
			n.marks["stop.deadline"] = n.marks["stop"].Add(t.Remaining())
		}
	}
	err = a.stop(n)
	n.marks["returned"] = time.Now()
	n.closed = true
	return err
}

// envMu is held while a step has changed the process's environment.
var envMu sync.Mutex

// fxStartWithEnv builds and starts the app of node name with its session
// timing read from the environment the table sets (an empty value unsets
// the variable). The environment is restored once the app is built, which
// is when it is read. An app that fails to build is noted for a later step.
//
// The environment is the process's, and the backends' suites run side by
// side: envMu keeps one scenario's variables from reaching another's app.
func (w *world) fxStartWithEnv(name string, table *godog.Table) error {
	n, a, err := w.fxNode(name)
	if err != nil {
		return err
	}
	envMu.Lock()
	defer envMu.Unlock()
	var restore []func()
	defer func() {
		for _, r := range restore {
			r()
		}
	}()
	for _, row := range table.Rows {
		if len(row.Cells) != 2 {
			return fmt.Errorf("features: want rows of a variable and its value")
		}
		key, value := row.Cells[0].Value, row.Cells[1].Value
		if old, ok := os.LookupEnv(key); ok {
			restore = append(restore, func() { _ = os.Setenv(key, old) })
		} else {
			restore = append(restore, func() { _ = os.Unsetenv(key) })
		}
		if value == "" {
			err = os.Unsetenv(key)
		} else {
			err = os.Setenv(key, value)
		}
		if err != nil {
			return err
		}
	}
	if err := w.build(n, a, fx.Provide(fxsimba.ConfigFromEnv)); err != nil {
		return nil // the next steps say what they expect of it
	}
	return a.start(n)
}

func (w *world) fxFailed(name, variable, says string) error {
	_, a, err := w.fxNode(name)
	if err != nil {
		return err
	}
	switch {
	case a.err == nil:
		return fmt.Errorf("node %s's fx app did not fail", name)
	case !strings.Contains(a.err.Error(), variable) || !strings.Contains(a.err.Error(), says):
		return fmt.Errorf("node %s's fx app failed with %q, which does not name %s and say %q", name, a.err.Error(), variable, says)
	}
	return nil
}

func (w *world) noBackendCall(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if calls := n.rec.snapshot(); len(calls) > 0 {
		return fmt.Errorf("node %s made %d backend calls, the first a %s", name, len(calls), calls[0].op)
	}
	return nil
}

func (w *world) closedAfterRelease(name, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	rel, ok := n.releaseOfTerm(t)
	if !ok {
		return fmt.Errorf("node %s never released %v", name, t)
	}
	var closed *call
	for _, c := range n.rec.filter(memory.OpCloseSession, "") {
		if c.session == t.Session() {
			closed = &c
		}
	}
	if closed == nil {
		return fmt.Errorf("node %s never closed the session %s", name, t.Session())
	}
	return inOrder([]instant{
		{"release answered", rel.end},
		{"session close sent", closed.start},
		{"session close answered", closed.end},
		{"the app's stop returned", n.marks["returned"]},
	})
}
