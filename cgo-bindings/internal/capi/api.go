package capi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
	"unicode/utf8"

	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simba "github.com/simba-go/simba/core"
)

// Version is the version of the library, SIMBA_VERSION in simba.h.
const Version = "0.1.0"

// ABIVersion is SIMBA_ABI_VERSION: it changes only when a function or
// type of simba.h changes incompatibly.
const ABIVersion = 1

// NoTimeout is SIMBA_NO_TIMEOUT: a timeout argument with this value waits
// until the wait ends by itself or its cancel handle is cancelled.
const NoTimeout = -1

// DefaultOpenTimeout bounds the opening of a backend when the options give
// no timeout.
const DefaultOpenTimeout = 10 * time.Second

// maxMillis is the largest millisecond count a time.Duration holds.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// Options are the settings of OpenClient, the fields of simba_options.
type Options struct {
	LeaseMS       int64  // lease duration; 0 takes the default (15s)
	RenewMS       int64  // renew interval; 0 takes the default (lease/3)
	Identity      string // the identity of the session; "" takes host:pid
	OpenTimeoutMS int64  // bound of the backend's opening; 0 takes 10s
}

type clientRef struct {
	c   *simba.Client
	b   simba.OpenedBackend
	hub *eventHub // the client's event streams

	mu     sync.Mutex
	closed bool
	owned  map[uint64]struct{} // lock terms and elections, freed with the client
	// The adapters of the elections not released yet: started ones, and
	// stopped ones whose stop still runs; a close waits for their release.
	unreleased map[*adapter]struct{}
}

// own records h as freed with the client; it fails when the client was
// closed meanwhile.
func (cr *clientRef) own(h uint64) bool {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.closed {
		return false
	}
	cr.owned[h] = struct{}{}
	return true
}

func (cr *clientRef) disown(h uint64) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	delete(cr.owned, h)
}

// ownElection records the election h as freed with the client, and its
// adapter as one whose release the client's close waits for; it fails
// when the client was closed meanwhile.
func (cr *clientRef) ownElection(h uint64, a *adapter) bool {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.closed {
		return false
	}
	cr.owned[h] = struct{}{}
	cr.unreleased[a] = struct{}{}
	return true
}

// forget drops the adapter a, released or never started, from what the
// client's close waits for.
func (cr *clientRef) forget(a *adapter) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	delete(cr.unreleased, a)
}

type termRef struct {
	client   *clientRef
	term     *simba.Term
	lock     *simba.LockTerm // nil for the term of an election
	election *electionRef    // nil for a lock term
}

type electionRef struct {
	client *clientRef
	el     *simba.Election
	ad     *adapter

	mu    sync.Mutex
	terms map[*simba.Term]uint64
}

type cancelRef struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// checkString refuses a string from C that is not UTF-8.
func checkString(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, what)
	}
	return nil
}

// duration converts a count of milliseconds of a setting (a lease, a
// renew interval); one too large to be a time.Duration is refused.
func duration(what string, ms int64) (time.Duration, error) {
	switch {
	case ms < 0:
		return 0, fmt.Errorf("%w: %s %dms is negative", ErrInvalidArgument, what, ms)
	case ms > maxMillis:
		return 0, fmt.Errorf("%w: %s %dms is too large (at most %d)", ErrInvalidArgument, what, ms, maxMillis)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// waitDuration converts a count of milliseconds of a wait: NoTimeout
// (where allowed) reports forever, and a wait longer than a time.Duration
// holds waits the longest one (about 292 years) instead of being refused.
func waitDuration(what string, ms int64, allowForever bool) (d time.Duration, forever bool, err error) {
	switch {
	case ms == NoTimeout && allowForever:
		return 0, true, nil
	case ms < 0:
		return 0, false, fmt.Errorf("%w: %s %dms is negative", ErrInvalidArgument, what, ms)
	}
	return time.Duration(min(ms, maxMillis)) * time.Millisecond, false, nil
}

// waitContext derives the context of a wait: from parent, ended by the
// timeout (unless it is NoTimeout) and by the cancel handle (unless 0).
func waitContext(parent context.Context, timeoutMS int64, cancel uint64) (context.Context, context.CancelFunc, error) {
	d, forever, err := waitDuration("timeout", timeoutMS, true)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := parent, context.CancelFunc(func() {})
	if cancel != 0 {
		cr, err := cancelOf(cancel)
		if err != nil {
			return nil, nil, err
		}
		var stopCancel context.CancelFunc
		ctx, stopCancel = context.WithCancel(ctx)
		unhook := context.AfterFunc(cr.ctx, stopCancel)
		stop = func() { unhook(); stopCancel() }
	}
	if !forever {
		var stopTimeout context.CancelFunc
		ctx, stopTimeout = context.WithTimeout(ctx, d)
		outer := stop
		stop = func() { stopTimeout(); outer() }
	}
	return ctx, stop, nil
}

// OpenClient opens the backend of url (any scheme a linked backend
// registered) and a client on it, and returns the client's handle. The
// client opens its session in the background. A backend that does not
// answer within the open timeout is BackendUnavailable; SQL tables that
// were never created are a Backend error (the server answered). Errors
// never quote the URL's password.
func OpenClient(url string, o Options) (uint64, error) {
	if err := checkString("backend URL", url); err != nil {
		return 0, err
	}
	if err := checkString("identity", o.Identity); err != nil {
		return 0, err
	}
	lease, err := duration("lease", o.LeaseMS)
	if err != nil {
		return 0, err
	}
	renew, err := duration("renew", o.RenewMS)
	if err != nil {
		return 0, err
	}
	openTimeout, _, err := waitDuration("open timeout", o.OpenTimeoutMS, false)
	if err != nil {
		return 0, err
	}
	if openTimeout == 0 {
		openTimeout = DefaultOpenTimeout
	}
	cfg := simba.Config{LeaseDuration: lease, RenewInterval: renew}
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	hub := newEventHub()
	opts := []simba.Option{simba.WithConfig(cfg), simba.WithEventListener(hub.publish)}
	if o.Identity != "" {
		opts = append(opts, simba.WithIdentity(o.Identity))
	}
	rememberSecrets(url)
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	b, err := simba.OpenBackend(ctx, url)
	if err != nil {
		if s := StatusOf(err); s == InvalidURL || s == InvalidArgument || errors.Is(err, simbapg.ErrSchemaMissing) || errors.Is(err, simbamysql.ErrSchemaMissing) {
			return 0, err // the server answered: not an outage
		}
		return 0, fmt.Errorf("%w: %w", simba.ErrBackendUnavailable, err)
	}
	c, err := simba.New(b, opts...)
	if err != nil {
		_ = b.Close()
		return 0, err
	}
	return handles.add(&clientRef{c: c, b: b, hub: hub, owned: make(map[uint64]struct{}),
		unreleased: make(map[*adapter]struct{})}), nil
}

// CloseClient closes the client: its elections stop, its terms end, its
// session is closed so that the backend frees every lease at once, and its
// backend is closed. The client's handle is freed at once; the handles of
// its lock terms and elections when the close ends, whatever the outcome;
// the handle of an election's term after its revoked callback returned.
// timeoutMS bounds the whole call: past it, the call returns a Timeout
// error and the close goes on in the background. Once the close ended, no
// callback of the client's elections starts, and every Listener of them
// was released, also that of an election whose stop timed out before.
// Called from a callback (cb non-zero), it waits for no callback: the
// Listeners are released once their callbacks returned.
func CloseClient(client uint64, timeoutMS int64, cb uint64) error {
	cr, wait, stop, err := ending[*clientRef](client, kindClient, "closed", timeoutMS)
	if err != nil {
		return err
	}
	defer stop()
	cr.mu.Lock()
	cr.closed = true
	owned := cr.owned
	cr.owned = nil
	var unreleased []*adapter
	if cb == 0 {
		for a := range cr.unreleased {
			unreleased = append(unreleased, a)
		}
	}
	cr.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		err := cr.c.Close(callbackContext(cb))
		for h := range owned {
			if v, ok := handles.take(h); ok {
				if er, ok := v.(*electionRef); ok {
					er.ad.mute()
				}
			}
		}
		// A stop that timed out still runs: its callbacks, then the
		// release, come before the close ends.
		for _, a := range unreleased {
			<-a.released
		}
		cr.hub.end() // the streams give their last events, then end
		if berr := cr.b.Close(); berr != nil && err == nil {
			err = fmt.Errorf("close backend: %w", berr)
		}
		done <- err
	}()
	return awaitEnd(wait, done, "close client", timeoutMS)
}

// ending begins the close or stop of the handle h of kind k: it returns
// the value of h and the context that bounds the call by timeoutMS, and
// frees h. When another close or stop freed h first, the error says that
// h is being done (closed, stopped).
func ending[T any](h uint64, k kind, done string, timeoutMS int64) (T, context.Context, context.CancelFunc, error) {
	v, err := handleOf[T](h, k)
	if err != nil {
		return v, nil, nil, err
	}
	wait, stop, err := waitContext(context.Background(), timeoutMS, 0)
	if err != nil {
		return v, nil, nil, err
	}
	if !handles.remove(h) {
		stop()
		return v, nil, nil, fmt.Errorf("%w: %s %d is being %s", ErrBadHandle, k, h, done)
	}
	return v, wait, stop, nil
}

// awaitEnd waits for the outcome of a close or stop that runs in the
// background, until wait ends. An outcome that is there when wait ends
// wins: a timeout of 0 does not wait, and reports work already done as
// done instead of as a timeout.
func awaitEnd(wait context.Context, done <-chan error, what string, timeoutMS int64) error {
	select {
	case err := <-done:
		return err
	default:
	}
	select {
	case err := <-done:
		return err
	case <-wait.Done():
		select {
		case err := <-done:
			return err
		default:
		}
		return fmt.Errorf("%s: not done within %dms, it goes on in the background: %w", what, timeoutMS, wait.Err())
	}
}

// Acquire waits for the lock of name on the client, at most timeoutMS
// (NoTimeout: no bound) and until the cancel handle, if not 0, is
// cancelled; with try, it makes one attempt (simba's TryAcquire) within
// the same bounds, a timeout of 0 meaning the attempt's own bound of one
// lease duration. Without try, a timeout of 0 makes one attempt too, and
// fails with a LockTimeout error when the lease is held. It returns the
// handle of the lock term. A cancelled or timed-out acquisition never
// leaves the lock held (R-LOCK-2).
func Acquire(client uint64, name string, timeoutMS int64, cancel uint64, try bool) (uint64, error) {
	cr, err := clientOf(client)
	if err != nil {
		return 0, err
	}
	if err := simba.ValidateName(name); err != nil {
		return 0, err
	}
	l := cr.c.Lock(name)
	return acquireTerm(cr, name, timeoutMS, cancel, try, l.Acquire, l.TryAcquire)
}

// AcquirePermit waits for one of the permits permits of the semaphore
// name on the client, with the bounds and the meaning of timeoutMS,
// cancel and try of Acquire. It returns the handle of the permit's lock
// term, which Release, FreeTerm and the term functions take as any lock
// term. The permits must be 1 to simba.MaxPermits and the name valid with
// the name of its last slot; a semaphore held with another number of
// permits gives an error matching simba.ErrPermitsMismatch.
func AcquirePermit(client uint64, name string, permits int64, timeoutMS int64, cancel uint64, try bool) (uint64, error) {
	cr, err := clientOf(client)
	if err != nil {
		return 0, err
	}
	if permits < 1 || permits > simba.MaxPermits {
		return 0, fmt.Errorf("%w: semaphore %s: %d permits, want 1 to %d", simba.ErrInvalidArgument, name, permits, simba.MaxPermits)
	}
	if err := simba.ValidatePermit(simba.Permit{Semaphore: name, Permits: int(permits)}); err != nil {
		return 0, fmt.Errorf("semaphore %q: %w", name, err)
	}
	s := cr.c.Semaphore(name, int(permits))
	return acquireTerm(cr, name, timeoutMS, cancel, try, s.Acquire, s.TryAcquire)
}

// acquireTerm makes the acquisition of Acquire and AcquirePermit with the
// waiting and the one-attempt calls of a lock or a semaphore, and returns
// the handle of the term it won.
func acquireTerm(cr *clientRef, name string, timeoutMS int64, cancel uint64, try bool,
	wait, attempt func(context.Context) (*simba.LockTerm, error)) (uint64, error) {
	// A timeout of 0 is not passed to simba as a ctx already past its
	// deadline: simba's one attempt would then run WithoutCancel, and the
	// cancel handle (Ctrl-C in Python) could not end it.
	once := !try && timeoutMS == 0
	if try || once {
		if timeoutMS == 0 {
			timeoutMS = NoTimeout // the attempt's own bound, one lease duration, applies
		}
	}
	ctx, stop, err := waitContext(context.Background(), timeoutMS, cancel)
	if err != nil {
		return 0, err
	}
	defer stop()
	var lt *simba.LockTerm
	if try || once {
		lt, err = attempt(ctx)
	} else {
		lt, err = wait(ctx)
	}
	if once && errors.Is(err, simba.ErrLockHeld) {
		return 0, fmt.Errorf("%w: %s: held, and the timeout of 0 allows one attempt (%s)", simba.ErrLockTimeout, name, err.Error())
	}
	if err != nil {
		return 0, err
	}
	h := handles.add(&termRef{client: cr, term: lt.Term, lock: lt})
	if !cr.own(h) {
		handles.remove(h)
		_ = lt.Close()
		return 0, fmt.Errorf("acquire %s: %w", name, simba.ErrClosed)
	}
	return h, nil
}

// Token returns the fencing token of the term.
func Token(term uint64) (uint64, error) {
	tr, err := termOf(term)
	if err != nil {
		return 0, err
	}
	return tr.term.Token(), nil
}

// Valid reports whether the term lasts (R-TERM-3).
func Valid(term uint64) (bool, error) {
	tr, err := termOf(term)
	if err != nil {
		return false, err
	}
	return tr.term.Valid(), nil
}

// RemainingMS returns the time left to the term's local deadline in
// milliseconds, 0 once it ended.
func RemainingMS(term uint64) (int64, error) {
	tr, err := termOf(term)
	if err != nil {
		return 0, err
	}
	return tr.term.Remaining().Milliseconds(), nil
}

// EnsureValid fails with TermExpired unless the term stays valid for more
// than minMS (R-TERM-5).
func EnsureValid(term uint64, minMS int64) error {
	tr, err := termOf(term)
	if err != nil {
		return err
	}
	d, _, err := waitDuration("minimum remaining", minMS, false)
	if err != nil {
		return err
	}
	return tr.term.EnsureValid(d)
}

// Reason returns why the term ended, 0 (NOT_REVOKED) while it lasts.
func Reason(term uint64) (int32, error) {
	tr, err := termOf(term)
	if err != nil {
		return 0, err
	}
	return int32(tr.term.Reason()), nil
}

// Release ends a lock term and releases its lease, waiting for the
// backend's answer at most timeoutMS. It is idempotent (R-LOCK-6); the
// handle stays valid until FreeTerm. The term of an election is ended by
// StepDown or StopElection, not here.
func Release(term uint64, timeoutMS int64) error {
	tr, err := termOf(term)
	if err != nil {
		return err
	}
	if tr.lock == nil {
		return fmt.Errorf("%w: term %d belongs to an election: step down or stop it", ErrInvalidArgument, term)
	}
	ctx, stop, err := waitContext(context.Background(), timeoutMS, 0)
	if err != nil {
		return err
	}
	defer stop()
	return tr.lock.Release(ctx)
}

// FreeTerm releases a lock term if it still holds its lease and frees its
// handle. The handles of an election's terms are freed by the library
// after their revoked callback returned; freeing one is refused.
func FreeTerm(term uint64) error {
	tr, err := termOf(term)
	if err != nil {
		return err
	}
	if tr.lock == nil {
		return fmt.Errorf("%w: term %d belongs to an election and is freed after its revoked callback", ErrInvalidArgument, term)
	}
	if !handles.remove(term) {
		return fmt.Errorf("%w: term %d is being freed", ErrBadHandle, term)
	}
	tr.client.disown(term)
	return tr.lock.Close()
}

// Listener receives the callbacks of an election; package main implements
// it with the C function pointers of simba_listener. cb identifies the
// callback for the calls it makes back into the library. Released is
// called once, after the last callback returned.
type Listener interface {
	Elected(election, term, token, cb uint64)
	Revoked(election, term, token uint64, reason int32, cb uint64)
	Released()
}

// adapter passes the engine's callbacks of one election to its Listener.
// Once the election's stop or its client's close ended (mute), no
// OnElected reaches the Listener any more, and an OnRevoked only for a
// term whose OnElected did (a stop called from a callback ends before the
// engine delivers that term's OnRevoked), so callbacks stay paired
// (R-CB-1). Released follows the last of them; released is closed once
// it returned.
type adapter struct {
	ref      *electionRef
	h        uint64
	l        Listener
	released chan struct{}

	mu      sync.Mutex
	shown   map[*simba.Term]bool // terms whose OnElected reached the Listener, until their OnRevoked did
	running int                  // callbacks in the Listener now
	muted   bool                 // the stop ended: no OnElected starts
	done    bool                 // Released was called
}

// enter reports whether the callback of t may start, and counts it.
func (a *adapter) enter(t *simba.Term, elected bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case elected && a.muted:
		return false
	case elected:
		a.shown[t] = true
	case !a.shown[t]:
		return false
	default:
		delete(a.shown, t)
	}
	a.running++
	return true
}

// leave counts a callback's return; the last one after mute releases.
func (a *adapter) leave() {
	a.mu.Lock()
	a.running--
	a.mu.Unlock()
	a.releaseIfDone()
}

// mute lets no callback start any more; Released follows once the
// running one, if any, returned.
func (a *adapter) mute() {
	a.mu.Lock()
	a.muted = true
	a.mu.Unlock()
	a.releaseIfDone()
}

func (a *adapter) releaseIfDone() {
	a.mu.Lock()
	release := a.muted && a.running == 0 && len(a.shown) == 0 && !a.done
	if release {
		a.done = true
	}
	a.mu.Unlock()
	if release {
		a.l.Released()
		a.ref.client.forget(a)
		close(a.released)
	}
}

// abandon ends the adapter of an election whose start failed without
// calling Released: a close that began meanwhile does not wait for it.
func (a *adapter) abandon() {
	a.mu.Lock()
	abandoned := !a.done
	a.done = true
	a.mu.Unlock()
	if abandoned {
		a.ref.client.forget(a)
		close(a.released)
	}
}

func (a *adapter) OnElected(ctx context.Context, t *simba.Term) {
	th := handles.add(&termRef{client: a.ref.client, term: t, election: a.ref})
	a.ref.mu.Lock()
	a.ref.terms[t] = th
	a.ref.mu.Unlock()
	// Not owned by the client: the handle stays valid until the revoked
	// callback returned, also through a close of the client from the
	// elected callback; OnRevoked, which the engine pairs with every
	// OnElected (R-CB-1), frees it.
	if !a.enter(t, true) {
		return
	}
	defer a.leave()
	cb := enterCallback(ctx)
	defer leaveCallback(cb)
	a.l.Elected(a.h, th, t.Token(), cb)
}

func (a *adapter) OnRevoked(ctx context.Context, t *simba.Term, reason simba.RevokeReason) {
	a.ref.mu.Lock()
	th := a.ref.terms[t]
	delete(a.ref.terms, t)
	a.ref.mu.Unlock()
	defer handles.remove(th)
	if !a.enter(t, false) {
		return
	}
	defer a.leave()
	cb := enterCallback(ctx)
	defer leaveCallback(cb)
	a.l.Revoked(a.h, th, t.Token(), int32(reason), cb)
}

// StartElection starts contending for name on the client and returns the
// election's handle. The listener's callbacks run one at a time, in order,
// on a thread of the library (R-CB-1, R-CB-2).
func StartElection(client uint64, name string, l Listener) (uint64, error) {
	cr, err := clientOf(client)
	if err != nil {
		return 0, err
	}
	if l == nil {
		return 0, fmt.Errorf("%w: nil listener", ErrInvalidArgument)
	}
	if err := simba.ValidateName(name); err != nil {
		return 0, err
	}
	ref := &electionRef{client: cr, el: cr.c.Election(name), terms: make(map[*simba.Term]uint64)}
	h := handles.add(ref)
	ref.ad = &adapter{ref: ref, h: h, l: l, released: make(chan struct{}), shown: make(map[*simba.Term]bool)}
	if !cr.ownElection(h, ref.ad) {
		handles.remove(h)
		return 0, fmt.Errorf("start %s: %w", name, simba.ErrClosed)
	}
	if err := ref.el.Start(ref.ad); err != nil {
		cr.disown(h)
		ref.ad.abandon()
		handles.remove(h)
		return 0, err
	}
	return h, nil
}

// StopElection stops the election and frees its handle: the current term
// is revoked and released and its revoked callback runs before the call
// returns, unless the wait exceeds timeoutMS (the stop completes anyway,
// in the background). Called from a callback of the election (cb
// non-zero), it does not wait for that callback (R-CB-5), and the only
// callback still to come is the OnRevoked of the term whose OnElected ran.
// Otherwise, after a return without timeout no callback comes. The
// Listener's Released follows the last one. After a stop that timed out,
// the callback running then returns, the OnRevoked of its term follows,
// and the client's close waits for the Released.
func StopElection(election uint64, timeoutMS int64, cb uint64) error {
	er, wait, stop, err := ending[*electionRef](election, kindElection, "stopped", timeoutMS)
	if err != nil {
		return err
	}
	defer stop()
	er.client.disown(election)
	done := make(chan error, 1)
	go func() {
		err := er.el.Stop(callbackContext(cb))
		er.ad.mute()
		done <- err
	}()
	return awaitEnd(wait, done, "stop election", timeoutMS)
}

// StepDown gives the current term of the election up and keeps it
// started: it contends again cooldownMS after the step-down (R-HO-4). The
// call is bounded by timeoutMS like StopElection's: past it, the step-down
// goes on in the background.
func StepDown(election uint64, cooldownMS, timeoutMS int64, cb uint64) error {
	er, err := electionOf(election)
	if err != nil {
		return err
	}
	cooldown, _, err := waitDuration("cooldown", cooldownMS, false)
	if err != nil {
		return err
	}
	wait, stop, err := waitContext(context.Background(), timeoutMS, 0)
	if err != nil {
		return err
	}
	defer stop()
	// In the background, as a stop: the engine gives the lease back before
	// it looks at the ctx, so a backend that does not answer would hold the
	// call past its timeout.
	done := make(chan error, 1)
	go func() { done <- er.el.StepDown(callbackContext(cb), cooldown) }()
	return awaitEnd(wait, done, "step down", timeoutMS)
}

// Snapshot returns the client's snapshot (R-OBS-1) as the JSON document
// of docs/snapshot.schema.json (simba.SnapshotDocument): durations in
// whole milliseconds, leases a list, empty when there is none.
func Snapshot(client uint64) ([]byte, error) {
	cr, err := clientOf(client)
	if err != nil {
		return nil, err
	}
	return json.Marshal(cr.c.Snapshot().Document())
}

// NewCancel returns a new cancel handle.
func NewCancel() uint64 {
	ctx, cancel := context.WithCancel(context.Background())
	return handles.add(&cancelRef{ctx: ctx, cancel: cancel})
}

// Cancel ends every wait given the cancel handle, now and later: a
// cancel handle stays cancelled.
func Cancel(h uint64) error {
	cr, err := cancelOf(h)
	if err != nil {
		return err
	}
	cr.cancel()
	return nil
}

// FreeCancel frees a cancel handle; it cancels it first.
func FreeCancel(h uint64) error {
	cr, err := cancelOf(h)
	if err != nil {
		return err
	}
	cr.cancel()
	handles.remove(h)
	return nil
}

// Goroutines returns the number of goroutines of the process.
func Goroutines() int { return runtime.NumGoroutine() }

// callbacks maps the ids of running callbacks to their contexts, so that a
// call a callback makes into the library passes the callback's ctx to the
// engine and does not wait for itself (R-CB-5).
var callbacks = struct {
	sync.Mutex
	next uint64
	m    map[uint64]context.Context
}{m: make(map[uint64]context.Context)}

func enterCallback(ctx context.Context) uint64 {
	callbacks.Lock()
	defer callbacks.Unlock()
	callbacks.next++
	callbacks.m[callbacks.next] = context.WithoutCancel(ctx)
	return callbacks.next
}

func leaveCallback(id uint64) {
	callbacks.Lock()
	defer callbacks.Unlock()
	delete(callbacks.m, id)
}

// callbackContext returns the context of the running callback id, or
// context.Background for 0 or an id that is not running.
func callbackContext(id uint64) context.Context {
	if id == 0 {
		return context.Background()
	}
	callbacks.Lock()
	defer callbacks.Unlock()
	if ctx, ok := callbacks.m[id]; ok {
		return ctx
	}
	return context.Background()
}
