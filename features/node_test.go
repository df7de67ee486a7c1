package features

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// node is one process of a scenario: a client over its own connection to
// the backend, with a recorder in between, a listener per election and a
// log of its events.
type node struct {
	w      *world
	name   string
	timing simba.Config

	identity string // as connectOptions.identity

	client  *simba.Client
	clients []*simba.Client // every client the node had, the current one last
	rec     *recorder
	backend simba.Backend // the recorder, as the client sees it
	conn    *memory.Conn  // memory backend only
	link    link
	close   func()
	closed  bool

	events    *eventLog
	logs      *logCapture
	exec      *rejectingExecutor
	listeners map[string]*listener
	works     map[string]*work             // leader work by lease
	schedules map[string]*schedule         // scheduled work by lease
	groups    map[string][]*groupRun       // group runs by group name, in the order started
	locks     map[string][]*simba.LockTerm // lock terms by lease, in the order won
	acqs      map[string]*acquisition      // the latest background acquisition by lease
	released  map[*simba.LockTerm]bool     // lock terms a step released
	watched   map[string]*simba.Term       // the term steps mean by "n's term of lease"
	stop      *backgroundStop
	made      *madeCall             // the call a callback or leader work was asked to make
	lastCall  *lockCall             // the node's last direct Acquire or TryAcquire call
	marks     map[string]time.Time  // when the node's steps did what later steps measure from: stop, stepdown, stall, ...
	holds     map[string]*heldReply // by operation: the reply of the node held back
	rejected  uint64                // the token of the term a rejected callback was given
	metrics   *metricsOf            // the node's collector, when connected with metrics
	wg        sync.WaitGroup        // background goroutines of steps
}

// connectOptions change how a node's client is built.
type connectOptions struct {
	cfg       *simba.Config // timing; the world's when nil
	stalled   bool          // the connection is stalled before the client starts
	noEvents  bool          // no event listener (so an executor sees only election callbacks)
	rejecting bool          // the callback executor rejects the next callback
	onEvent   func(ctx context.Context, n *node, e simba.Event)
	identity  string // the identity of the node's sessions; core's default when empty
}

// connect adds node name to the scenario.
func (w *world) connect(name string, o connectOptions) (*node, error) {
	if _, ok := w.nodes[name]; ok {
		return nil, fmt.Errorf("features: node %s is already connected", name)
	}
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	nb, err := w.env.connect(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("features: connect node %s to %s: %w", name, w.env.name, err)
	}
	rec, backend := newRecorder(nb.backend)
	rec.capLease(w.leaseCap)
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
	if o.cfg != nil {
		n.timing = *o.cfg
	}
	n.identity = o.identity
	w.nodes[name] = n
	if o.stalled {
		n.link.Stall()
	}
	if o.rejecting {
		n.exec = &rejectingExecutor{}
		n.exec.rejectNext()
	}
	if o.onEvent != nil {
		n.events.hook = func(ctx context.Context, e simba.Event) { o.onEvent(ctx, n, e) }
	}
	if err := n.newClient(o.noEvents); err != nil {
		return nil, err
	}
	return n, nil
}

// newClient builds the node's client (again, after a reconnect).
func (n *node) newClient(noEvents bool) error {
	opts := []simba.Option{simba.WithConfig(n.timing), simba.WithLogger(slog.New(n.logs))}
	if !noEvents {
		opts = append(opts, simba.WithEventListener(n.events.record))
	}
	if n.exec != nil {
		opts = append(opts, simba.WithCallbackExecutor(n.exec))
	}
	if n.identity != "" {
		opts = append(opts, simba.WithIdentity(n.identity))
	}
	c, err := simba.New(n.backend, opts...)
	if err != nil {
		return fmt.Errorf("features: node %s: %w", n.name, err)
	}
	n.client = c
	n.clients = append(n.clients, c)
	n.closed = false
	return nil
}

// cfg is the node's timing as its client uses it.
func (n *node) cfg() simba.Config { return n.client.Config() }

// dur reads a duration phrase against the node's timing.
func (n *node) dur(phrase string) (time.Duration, error) { return n.w.dur(phrase, n.timing) }

// closeClient closes the node's client, bounded by a few lease durations.
func (n *node) closeClient() error {
	ctx, cancel := context.WithTimeout(context.Background(), 4*n.cfg().LeaseDuration)
	defer cancel()
	n.closed = true
	return n.client.Close(ctx)
}

// closeBackend closes the node's connection.
func (n *node) closeBackend() {
	if n.close != nil {
		n.close()
		n.close = nil
	}
}

// goBackground runs f in the background; the scenario waits for it at the end.
func (n *node) goBackground(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// sessionIDs returns the ids of every session the node opened, in order.
func (n *node) sessionIDs() []simba.SessionID {
	var ids []simba.SessionID
	for _, c := range n.rec.filter(memory.OpOpenSession, "") {
		if c.err == nil && c.session != "" {
			ids = append(ids, c.session)
		}
	}
	return ids
}

// listener returns the listener of the election name, creating it.
func (n *node) listener(name string) *listener {
	l, ok := n.listeners[name]
	if !ok {
		l = &listener{node: n}
		n.listeners[name] = l
	}
	return l
}

// terms returns every term of lease name the node was given, elections
// (with a listener or with leader work) and locks, in the order they were
// won.
func (n *node) terms(name string) []*simba.Term {
	var out []*simba.Term
	if l, ok := n.listeners[name]; ok {
		out = append(out, l.terms()...)
	}
	if wk, ok := n.works[name]; ok {
		out = append(out, wk.terms()...)
	}
	for _, lt := range n.locks[name] {
		out = append(out, lt.Term)
	}
	return out
}

// allTerms returns every term the node was given.
func (n *node) allTerms() []*simba.Term {
	var out []*simba.Term
	for _, l := range n.listeners {
		out = append(out, l.terms()...)
	}
	for _, wk := range n.works {
		out = append(out, wk.terms()...)
	}
	for _, lts := range n.locks {
		for _, lt := range lts {
			out = append(out, lt.Term)
		}
	}
	return out
}

// term returns the node's latest term of lease name.
func (n *node) term(name string) (*simba.Term, error) {
	ts := n.terms(name)
	if len(ts) == 0 {
		return nil, fmt.Errorf("node %s has no term of %s", n.name, name)
	}
	return ts[len(ts)-1], nil
}

// firstTerm returns the node's first term of lease name.
func (n *node) firstTerm(name string) (*simba.Term, error) {
	ts := n.terms(name)
	if len(ts) == 0 {
		return nil, fmt.Errorf("node %s has no term of %s", n.name, name)
	}
	return ts[0], nil
}

// leading reports whether the node holds a valid term of the election
// name, and its listener has been told (or its leader work started).
func (n *node) leading(name string) (*simba.Term, bool) {
	t := n.client.Election(name).Term()
	if t == nil || !t.Valid() {
		return nil, false
	}
	if wk, ok := n.works[name]; ok {
		_, started := wk.run(t)
		return t, started
	}
	if _, ok := n.schedules[name]; ok {
		return t, true
	}
	l, ok := n.listeners[name]
	if !ok || !l.told(t) {
		return nil, false
	}
	return t, true
}

// errWorkFailed is what failing leader work returns or panics with.
var errWorkFailed = errors.New("the work failed")

// work is leader work a node runs with RunWhileLeader, and what it saw.
type work struct {
	ignoreFor time.Duration   // the work ignores interruption this long
	exitAfter time.Duration   // once interrupted, the work takes this long to exit
	endAfter  time.Duration   // with ending set, the work ends on its own this long after it starts
	ending    string          // "fails", "panics" or "finishes"; empty: runs until interrupted
	quit      <-chan struct{} // closed when the scenario ends: the work stops waiting then
	done      chan struct{}   // closed when RunWhileLeader returned
	result    error           // what RunWhileLeader returned

	mu   sync.Mutex
	runs []*workRun
	call *madeCall // made once, by the first run
}

// workRun is one run of leader work, for one term.
type workRun struct {
	term        *simba.Term
	ctx         context.Context
	start       time.Time
	interrupted time.Time // when its ctx was cancelled; zero before
	end         time.Time // when it returned; zero before
}

// fn is the work function.
func (wk *work) fn(ctx context.Context, t *simba.Term) error {
	r := &workRun{term: t, ctx: ctx, start: time.Now()}
	wk.mu.Lock()
	wk.runs = append(wk.runs, r)
	mc := wk.call
	wk.call = nil
	wk.mu.Unlock()
	interrupted := func() {
		wk.mu.Lock()
		if r.interrupted.IsZero() {
			r.interrupted = time.Now()
		}
		wk.mu.Unlock()
	}
	stop := context.AfterFunc(ctx, interrupted)
	if mc != nil {
		mc.make(ctx, t)
	}
	if wk.ending != "" {
		select {
		case <-ctx.Done():
			interrupted()
		case <-time.After(wk.endAfter):
		}
		stop()
		wk.mu.Lock()
		r.end = time.Now()
		wk.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case wk.ending == "fails":
			return errWorkFailed
		case wk.ending == "panics":
			panic(errWorkFailed)
		}
		return nil
	}
	if wk.ignoreFor > 0 {
		pause(wk.ignoreFor, wk.quit)
	} else {
		<-ctx.Done()
		// The work saw the interruption itself: AfterFunc may not have
		// run yet, and stop below can keep it from running at all.
		interrupted()
		pause(wk.exitAfter, wk.quit)
	}
	if !stop() && ctx.Err() != nil {
		interrupted()
	}
	wk.mu.Lock()
	r.end = time.Now()
	wk.mu.Unlock()
	return nil
}

// pause waits d, or until quit is closed: work and callbacks that take
// their time stop waiting when the scenario ends, so none outlives it.
func pause(d time.Duration, quit <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-quit:
	}
}

// run returns a copy of the run of t.
func (wk *work) run(t *simba.Term) (workRun, bool) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	for _, r := range wk.runs {
		if r.term == t {
			return *r, true
		}
	}
	return workRun{}, false
}

// terms returns the terms the work ran for, in order.
func (wk *work) terms() []*simba.Term {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	out := make([]*simba.Term, len(wk.runs))
	for i, r := range wk.runs {
		out[i] = r.term
	}
	return out
}

// listener records the callbacks of one election of a node, and can be
// told to be slow or to call into the client.
type listener struct {
	node *node

	mu           sync.Mutex
	calls        []*callback
	running      int
	maxRunning   int
	electedDelay time.Duration // OnElected takes this long, ignoring interruption
	revokedDelay time.Duration // OnRevoked takes this long
	intoClient   bool          // every callback calls into the client
	call         *madeCall     // made once, by the next OnElected
	intoErrs     []error
}

// callback is one call of a listener.
type callback struct {
	elected bool
	term    *simba.Term
	reason  simba.RevokeReason
	ctx     context.Context
	start   time.Time
	end     time.Time // zero while running
}

func (l *listener) enter(ctx context.Context, elected bool, t *simba.Term, reason simba.RevokeReason) *callback {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &callback{elected: elected, term: t, reason: reason, ctx: ctx, start: time.Now()}
	l.calls = append(l.calls, c)
	l.running++
	l.maxRunning = max(l.maxRunning, l.running)
	return c
}

func (l *listener) leave(c *callback) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.end = time.Now()
	l.running--
}

// OnElected records the call, then does what the scenario asked.
func (l *listener) OnElected(ctx context.Context, t *simba.Term) {
	c := l.enter(ctx, true, t, simba.NotRevoked)
	defer l.leave(c)
	l.mu.Lock()
	delay, into, mc := l.electedDelay, l.intoClient, l.call
	l.call = nil
	l.mu.Unlock()
	if into {
		l.callIntoClient(t.Name())
	}
	if delay > 0 {
		pause(delay, l.node.w.ctx.Done()) // work that ignores interruption
	}
	if mc != nil {
		mc.make(ctx, t)
	}
}

// OnRevoked records the call, then takes as long as the scenario asked.
func (l *listener) OnRevoked(ctx context.Context, t *simba.Term, reason simba.RevokeReason) {
	c := l.enter(ctx, false, t, reason)
	defer l.leave(c)
	l.mu.Lock()
	delay, into := l.revokedDelay, l.intoClient
	l.mu.Unlock()
	if into {
		l.callIntoClient(t.Name())
	}
	if delay > 0 {
		pause(delay, l.node.w.ctx.Done())
	}
}

// callIntoClient reads the snapshot and the election's term from inside a
// callback: it would deadlock if the engine held a lock while callbacks run.
func (l *listener) callIntoClient(name string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.node.client.Snapshot()
		_ = l.node.client.Election(name).Term()
	}()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		l.mu.Lock()
		l.intoErrs = append(l.intoErrs, errors.New("a call into the client from a callback did not return within 1s"))
		l.mu.Unlock()
		<-done
	}
}

// setCall makes the next OnElected make mc.
func (l *listener) setCall(mc *madeCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.call = mc
}

// madeCall is a blocking call a callback or leader work makes into the
// client with the ctx it was given (R-CB-5), and how it went. err and took
// are set before done is closed.
type madeCall struct {
	fn   func(ctx context.Context, t *simba.Term) error
	done chan struct{}
	err  error
	took time.Duration
}

func newMadeCall(fn func(ctx context.Context, t *simba.Term) error) *madeCall {
	return &madeCall{fn: fn, done: make(chan struct{})}
}

// make makes the call and records how it went.
func (m *madeCall) make(ctx context.Context, t *simba.Term) {
	start := time.Now()
	m.err = m.fn(ctx, t)
	m.took = time.Since(start)
	close(m.done)
}

// snapshot returns a copy of the calls so far.
func (l *listener) snapshot() []callback {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]callback, len(l.calls))
	for i, c := range l.calls {
		out[i] = *c
	}
	return out
}

// terms returns the terms the listener was told of, in order.
func (l *listener) terms() []*simba.Term {
	var out []*simba.Term
	for _, c := range l.snapshot() {
		if c.elected {
			out = append(out, c.term)
		}
	}
	return out
}

// told reports whether OnElected of t has been called.
func (l *listener) told(t *simba.Term) bool {
	for _, c := range l.snapshot() {
		if c.elected && c.term == t {
			return true
		}
	}
	return false
}

// revocations returns the OnRevoked calls of t.
func (l *listener) revocations(t *simba.Term) []callback {
	var out []callback
	for _, c := range l.snapshot() {
		if !c.elected && c.term == t {
			out = append(out, c)
		}
	}
	return out
}

// eventLog keeps the events of a node's clients.
type eventLog struct {
	mu     sync.Mutex
	events []simba.Event
	hook   func(ctx context.Context, e simba.Event)

	// A Close called from the hook (R-CB-5).
	closed    bool
	closeErr  error
	closeTook time.Duration
}

func (l *eventLog) record(ctx context.Context, e simba.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	hook := l.hook
	l.mu.Unlock()
	if hook != nil {
		hook(ctx, e)
	}
}

// of returns the events of kind (every event when 0).
func (l *eventLog) of(kind simba.EventKind) []simba.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []simba.Event
	for _, e := range l.events {
		if kind == 0 || e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// rejectingExecutor runs callbacks on new goroutines, but rejects the next
// one when asked to.
type rejectingExecutor struct {
	mu       sync.Mutex
	reject   bool
	rejected int
}

func (x *rejectingExecutor) rejectNext() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.reject = true
}

func (x *rejectingExecutor) Execute(task func()) error {
	x.mu.Lock()
	reject := x.reject
	x.reject = false
	if reject {
		x.rejected++
	}
	x.mu.Unlock()
	if reject {
		return errors.New("features: executor rejects this callback")
	}
	go task()
	return nil
}

// acquisition is a lock acquisition running in the background.
type acquisition struct {
	name   string
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{}
	lt     *simba.LockTerm
	err    error
	end    time.Time
}

// lockCall is the outcome of a direct Acquire or TryAcquire call.
type lockCall struct {
	lt       *simba.LockTerm
	err      error
	panicked any
	start    time.Time
	end      time.Time
}
