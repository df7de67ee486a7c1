package features

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// errInjected is the error of the calls a fault makes fail.
var errInjected = errors.New("features: injected failure")

// call is one backend call of a node, as the recorder between the node's
// client and its backend saw it.
type call struct {
	op       string // memory.OpKeepAlive, ...
	session  simba.SessionID
	name     string        // the lease, for Acquire, Release and WatchRelease
	token    uint64        // Release: the token sent; Acquire: the token the client was given
	won      bool          // Acquire: the client was told it won
	start    time.Time     // when the client made the call
	budget   time.Duration // how far away the call's context deadline was; 0 without one
	answered time.Time     // when the backend answered (zero while it has not)
	end      time.Time     // when the answer reached the client (zero while in flight)
	err      error
}

// fault changes the calls of one operation: the next `times` of them, or
// every one when times is 0.
type fault struct {
	times  int
	fail   error         // the call fails at once, without reaching the backend
	hold   time.Duration // the answer reaches the client this long after the backend gave it, whatever its context says
	gate   chan struct{} // the answer reaches the client once gate is closed
	forge  uint64        // Acquire: a winning answer carries this token instead of the backend's
	onlyOn string        // the fault applies to calls about this lease only ("" for all)
}

// recorder is a simba.Backend that forwards every call to the node's real
// backend, records it, and injects the faults the scenario asks for. It
// works the same over every backend, so timing rules can be checked where
// the backend itself has no fault controls.
type recorder struct {
	inner  simba.Backend
	closed chan struct{} // closed when the scenario ends: held answers return at once

	mu          sync.Mutex
	calls       []*call
	faults      map[string][]*fault // by operation; "*" applies to every operation
	inflight    map[string]int      // Acquire calls in flight, by lease
	maxInflight map[string]int
	afterKA     func() // runs once, after the next successful keep-alive answered
	gates       []chan struct{}
	delay       time.Duration // every call waits this long before it reaches the backend
	maxLease    time.Duration // the backend is asked for, and grants, at most this lease; 0: no cap
}

// watchingRecorder is a recorder over a backend that broadcasts releases,
// so that the client sees the same optional interface.
type watchingRecorder struct {
	*recorder
	watcher simba.ReleaseNotifier
}

// newRecorder wraps b, keeping its ReleaseNotifier if it has one.
func newRecorder(b simba.Backend) (*recorder, simba.Backend) {
	r := &recorder{
		inner:       b,
		closed:      make(chan struct{}),
		faults:      make(map[string][]*fault),
		inflight:    make(map[string]int),
		maxInflight: make(map[string]int),
	}
	if n, ok := b.(simba.ReleaseNotifier); ok {
		return r, &watchingRecorder{recorder: r, watcher: n}
	}
	return r, r
}

// inject adds f to the calls of op.
func (r *recorder) inject(op string, f *fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[op] = append(r.faults[op], f)
	if f.gate != nil {
		r.gates = append(r.gates, f.gate)
	}
}

// clearFaults removes every fault and lets held answers through.
func (r *recorder) clearFaults() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.gates {
		openGate(g)
	}
	r.gates = nil
	r.faults = make(map[string][]*fault)
}

// end lets every held answer through, now and later.
func (r *recorder) end() {
	r.clearFaults()
	select {
	case <-r.closed:
	default:
		close(r.closed)
	}
}

func openGate(g chan struct{}) {
	select {
	case <-g:
	default:
		close(g)
	}
}

// onNextKeepAlive runs f once the next successful keep-alive has answered,
// before its answer reaches the client.
func (r *recorder) onNextKeepAlive(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.afterKA = f
}

// begin records a new call and picks the fault that applies to it.
func (r *recorder) begin(ctx context.Context, op string, s simba.SessionID, name string, token uint64) (*call, *fault) {
	c := &call{op: op, session: s, name: name, token: token, start: time.Now()}
	if d, ok := ctx.Deadline(); ok {
		c.budget = d.Sub(c.start)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	if op == memory.OpAcquire {
		r.inflight[name]++
		r.maxInflight[name] = max(r.maxInflight[name], r.inflight[name])
	}
	f := r.pick(op, name)
	if f == nil {
		f = r.pick("*", name)
	}
	return c, f
}

// setDelay makes every call from now on wait d before it reaches the
// backend, as over a slow network; d = 0 ends that.
func (r *recorder) setDelay(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
}

// capLease makes the backend grant leases of at most d: a session is asked
// for no more, and a reply never says more is left.
func (r *recorder) capLease(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxLease = d
}

// capped returns lease within the cap.
func (r *recorder) capped(lease time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.maxLease > 0 {
		return min(lease, r.maxLease)
	}
	return lease
}

// travel waits the delay a call takes to reach the backend; a call whose
// context ends on the way fails and never reaches it.
func (r *recorder) travel(ctx context.Context) error {
	r.mu.Lock()
	d := r.delay
	r.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("features: the call did not reach the backend: %w", ctx.Err())
	}
}

// pick returns the first fault of op that applies to name, using up one of
// its times. Call with r.mu held.
func (r *recorder) pick(op, name string) *fault {
	fs := r.faults[op]
	for i, f := range fs {
		if f.onlyOn != "" && f.onlyOn != name {
			continue
		}
		if f.times > 0 {
			f.times--
			if f.times == 0 {
				r.faults[op] = append(fs[:i:i], fs[i+1:]...)
			}
		}
		return f
	}
	return nil
}

// answered notes that the backend answered c.
func (r *recorder) answered(c *call, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.answered = time.Now()
	c.err = err
}

// hold delays the answer as f says.
func (r *recorder) hold(f *fault) {
	if f == nil {
		return
	}
	var timer <-chan time.Time
	if f.hold > 0 {
		t := time.NewTimer(f.hold)
		defer t.Stop()
		timer = t.C
	}
	if timer == nil && f.gate == nil {
		return
	}
	select {
	case <-timer:
	case <-f.gate:
	case <-r.closed:
	}
}

// finish notes that the answer reached the client, and returns err.
func (r *recorder) finish(c *call, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.end = time.Now()
	c.err = err
	if c.op == memory.OpAcquire {
		r.inflight[c.name]--
	}
	return err
}

// reach takes call c to the backend: it fails at once when its fault says
// so, and otherwise waits the delay of the way there.
func (r *recorder) reach(ctx context.Context, c *call, f *fault) error {
	var err error
	if f != nil && f.fail != nil {
		err = f.fail
	} else {
		err = r.travel(ctx)
	}
	if err != nil {
		r.answered(c, err)
		return r.finish(c, err)
	}
	return nil
}

func (r *recorder) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	c, f := r.begin(ctx, memory.OpOpenSession, "", "", 0)
	if err := r.reach(ctx, c, f); err != nil {
		return simba.SessionGrant{}, err
	}
	g, err := r.inner.OpenSession(ctx, r.capped(lease))
	g.Remaining = r.capped(g.Remaining)
	r.mu.Lock()
	c.session = g.ID
	r.mu.Unlock()
	r.answered(c, err)
	r.hold(f)
	return g, r.finish(c, err)
}

// OpenSessionAs records an OpenSession that carries an identity; a backend
// without the capability opens a session without one, as the engine would.
func (r *recorder) OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error) {
	c, f := r.begin(ctx, memory.OpOpenSession, "", "", 0)
	if err := r.reach(ctx, c, f); err != nil {
		return simba.SessionGrant{}, err
	}
	var g simba.SessionGrant
	var err error
	if o, ok := r.inner.(simba.IdentityOpener); ok {
		g, err = o.OpenSessionAs(ctx, r.capped(lease), identity)
	} else {
		g, err = r.inner.OpenSession(ctx, r.capped(lease))
	}
	g.Remaining = r.capped(g.Remaining)
	r.mu.Lock()
	c.session = g.ID
	r.mu.Unlock()
	r.answered(c, err)
	r.hold(f)
	return g, r.finish(c, err)
}

// Holder records a read of the holder of name; a backend without the
// capability gives ErrNotSupported.
func (r *recorder) Holder(ctx context.Context, name string) (simba.Holder, bool, error) {
	c, f := r.begin(ctx, memory.OpHolder, "", name, 0)
	if err := r.reach(ctx, c, f); err != nil {
		return simba.Holder{}, false, err
	}
	hr, ok := r.inner.(simba.HolderReader)
	if !ok {
		err := fmt.Errorf("features: the %T backend: %w", r.inner, simba.ErrNotSupported)
		r.answered(c, err)
		return simba.Holder{}, false, r.finish(c, err)
	}
	h, held, err := hr.Holder(ctx, name)
	r.answered(c, err)
	r.hold(f)
	return h, held, r.finish(c, err)
}

func (r *recorder) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	c, f := r.begin(ctx, memory.OpKeepAlive, s, "", 0)
	if err := r.reach(ctx, c, f); err != nil {
		return simba.KeepAliveReply{}, err
	}
	req.Lease = r.capped(req.Lease)
	reply, err := r.inner.KeepAlive(ctx, s, req)
	reply.Remaining = r.capped(reply.Remaining)
	r.answered(c, err)
	if err == nil {
		r.mu.Lock()
		after := r.afterKA
		r.afterKA = nil
		r.mu.Unlock()
		if after != nil {
			after()
		}
	}
	r.hold(f)
	return reply, r.finish(c, err)
}

func (r *recorder) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	return r.acquire(ctx, s, name, func() (simba.AcquireResult, error) { return r.inner.Acquire(ctx, s, name) })
}

// AcquirePermit records a permit's acquire as an Acquire of the permit's
// lease, with the same faults; a backend without the capability gives
// ErrNotSupported.
func (r *recorder) AcquirePermit(ctx context.Context, s simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	return r.acquire(ctx, s, simba.PermitName(p.Semaphore, p.Slot), func() (simba.AcquireResult, error) {
		if pa, ok := r.inner.(simba.PermitAcquirer); ok {
			return pa.AcquirePermit(ctx, s, p)
		}
		return simba.AcquireResult{}, fmt.Errorf("features: the %T backend: %w", r.inner, simba.ErrNotSupported)
	})
}

// acquire records the acquire of name that call makes.
func (r *recorder) acquire(ctx context.Context, s simba.SessionID, name string, call func() (simba.AcquireResult, error)) (simba.AcquireResult, error) {
	c, f := r.begin(ctx, memory.OpAcquire, s, name, 0)
	if err := r.reach(ctx, c, f); err != nil {
		return simba.AcquireResult{}, err
	}
	res, err := call()
	if err == nil && res.Won && f != nil && f.forge != 0 {
		res.Token = f.forge
	}
	r.mu.Lock()
	c.won, c.token = err == nil && res.Won, res.Token
	r.mu.Unlock()
	r.answered(c, err)
	r.hold(f)
	return res, r.finish(c, err)
}

func (r *recorder) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	c, f := r.begin(ctx, memory.OpRelease, s, name, token)
	if err := r.reach(ctx, c, f); err != nil {
		return err
	}
	err := r.inner.Release(ctx, s, name, token)
	r.answered(c, err)
	r.hold(f)
	return r.finish(c, err)
}

func (r *recorder) JoinGroup(ctx context.Context, s simba.SessionID, group string) (int, error) {
	c, f := r.begin(ctx, memory.OpJoinGroup, s, group, 0)
	if err := r.reach(ctx, c, f); err != nil {
		return 0, err
	}
	n, err := r.inner.JoinGroup(ctx, s, group)
	r.answered(c, err)
	r.hold(f)
	return n, r.finish(c, err)
}

func (r *recorder) LeaveGroup(ctx context.Context, s simba.SessionID, group string) error {
	c, f := r.begin(ctx, memory.OpLeaveGroup, s, group, 0)
	if err := r.reach(ctx, c, f); err != nil {
		return err
	}
	err := r.inner.LeaveGroup(ctx, s, group)
	r.answered(c, err)
	r.hold(f)
	return r.finish(c, err)
}

func (r *recorder) CloseSession(ctx context.Context, s simba.SessionID) error {
	c, f := r.begin(ctx, memory.OpCloseSession, s, "", 0)
	if err := r.reach(ctx, c, f); err != nil {
		return err
	}
	err := r.inner.CloseSession(ctx, s)
	r.answered(c, err)
	r.hold(f)
	return r.finish(c, err)
}

// WatchRelease is recorded like a call that ends when the watch is in
// place. Faults do not apply: a watch is a subscription, not a call.
func (w *watchingRecorder) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	r := w.recorder
	c := &call{op: memory.OpWatchRelease, name: name, start: time.Now()}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	ch, err := w.watcher.WatchRelease(ctx, name)
	r.answered(c, err)
	return ch, r.finish(c, err)
}

// snapshot returns a copy of the calls recorded so far.
func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]call, len(r.calls))
	for i, c := range r.calls {
		out[i] = *c
	}
	return out
}

// filter returns the recorded calls of op (every op when empty) about name
// (any when empty).
func (r *recorder) filter(op, name string) []call {
	var out []call
	for _, c := range r.snapshot() {
		if (op == "" || c.op == op) && (name == "" || c.name == name) {
			out = append(out, c)
		}
	}
	return out
}

// maxInFlight returns the most Acquire calls about name that were in flight
// at once.
func (r *recorder) maxInFlight(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxInflight[name]
}

// inFlight returns how many Acquire calls about name are in flight.
func (r *recorder) inFlight(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inflight[name]
}
