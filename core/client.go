package simba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Status is the state of a client's session (R-SES-5).
type Status int

// Session states.
const (
	StatusOpening   Status = iota // no session yet, or a new one after the last ended
	StatusLive                    // the last keep-alive succeeded
	StatusSuspended               // the last keep-alive failed, the deadline has not passed
	StatusClosed                  // the client is closed
)

var statusNames = [...]string{"OPENING", "LIVE", "SUSPENDED", "CLOSED"}

func (s Status) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return fmt.Sprintf("Status(%d)", int(s))
	}
	return statusNames[s]
}

// MarshalText makes statuses read as their names in JSON and logs.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Option configures a Client.
type Option func(*options) error

type options struct {
	identity  string
	cfg       Config
	logger    *slog.Logger
	listeners []func(context.Context, Event)
	exec      Executor
}

// WithConfig sets the session timing; the zero fields take their defaults.
// New fails with a *ConfigError when the result breaks a bound, or when
// its LeaseDuration exceeds the backend's bound (LeaseLimiter).
func WithConfig(cfg Config) Option {
	return func(o *options) error { o.cfg = cfg; return nil }
}

// WithLogger sets the structured logger. The default logs warnings and
// errors only, through slog.Default. Credentials are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidArgument)
		}
		o.logger = l
		return nil
	}
}

// WithEventListener registers fn to receive every Event of the client
// (R-OBS-2), one at a time and in order, on the callback executor. It may
// be given several times: every listener gets every event, in the order
// they were given; a listener that panics is logged and the next one still
// runs. The ctx it gets marks the call as a callback: pass it to
// Client.Close from there, and Close will not wait for the listener itself.
//
// Events are handed over in batches: at once while they are few, and past
// eight deliveries in a millisecond, at the end of that millisecond, so
// that a client that takes thousands of locks a second pays for a few
// hand-overs, not one per event. An event thus reaches the listeners at
// most a millisecond after its Time in a burst (a test on a fake clock
// sleeps that millisecond), and Close delivers what is pending before it
// returns. Emitting an event allocates nothing.
func WithEventListener(fn func(ctx context.Context, e Event)) Option {
	return func(o *options) error {
		if fn == nil {
			return fmt.Errorf("%w: nil event listener", ErrInvalidArgument)
		}
		o.listeners = append(o.listeners, fn)
		return nil
	}
}

// WithCallbackExecutor sets the Executor that runs listener callbacks.
// When it rejects an OnElected, the election steps down for one lease
// duration and that term's OnRevoked is not delivered either (R-CB-6).
func WithCallbackExecutor(e Executor) Option {
	return func(o *options) error {
		if e == nil {
			return fmt.Errorf("%w: nil executor", ErrInvalidArgument)
		}
		o.exec = e
		return nil
	}
}

// Client is one node's connection to a backend: it opens one session,
// keeps it alive with one call per renew interval whatever the number of
// leases it holds (R-SES-1), and runs the elections and locks of the node.
// A Client is safe for concurrent use. Close it to free every lease at once.
type Client struct {
	b        Backend
	notifier ReleaseNotifier
	identity string
	cfg      Config
	log      *slog.Logger
	exec     Executor
	events   *dispatcher // nil without an event listener
	onEvent  []func(context.Context, Event)
	deliver  task // the events dispatcher's one task: deliverEvents

	// The events not yet delivered, in order; evSpare is the batch last
	// delivered, kept for reuse. Guarded by evMu, taken after mu.
	evMu      sync.Mutex
	evPending []Event
	evSpare   []Event
	evQueued  bool        // a delivery is arranged (task queued or timer armed) and has not taken evPending yet
	evTimer   *time.Timer // arranges a delayed delivery; nil until the first burst
	evArmed   bool        // evTimer is armed
	evWindow  time.Time   // start of the window of eventBurst deliveries
	evBurst   int         // deliveries arranged in that window

	mu         sync.Mutex
	effects    []func() // run by unlock, after the lock is released
	kickEvents bool     // unlock kicks the events dispatcher
	closed     bool
	done       chan struct{} // closed by Close
	status     Status
	sess       *session // nil while opening
	entries    map[string]*entry
	groups     map[string]*groupState

	loopCtx  context.Context // ends the session loop and cancels calls in flight
	loopStop context.CancelFunc
	loopDone chan struct{}
	wg       sync.WaitGroup // backend calls and watches
}

// session is one session incarnation as the engine sees it.
type session struct {
	id        SessionID
	clock     *sessionClock
	renew     atomic.Int64      // the renew period in effect (R-DL-2, R-DL-5), read without the lock
	released  map[string]uint64 // highest token released per name (R-CAND-4)
	shortened bool              // SessionLeaseShortened published
	ended     bool
}

func (s *session) renewPeriod() time.Duration { return time.Duration(s.renew.Load()) }

// New returns a client of backend b and starts opening its session in the
// background: New itself makes no backend call and never blocks. Elections
// and locks may be used at once; they contend as soon as the session is
// open. It fails on a nil backend or an invalid option or config.
func New(b Backend, opts ...Option) (*Client, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidArgument)
	}
	o := options{exec: goExecutor{}}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidArgument)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	cfg, err := o.cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := checkLeaseLimit(b, cfg); err != nil {
		return nil, err
	}
	if o.logger == nil {
		o.logger = slog.New(quietHandler{slog.Default().Handler()})
	}
	if o.identity == "" {
		o.identity = defaultIdentity()
	}
	c := &Client{
		b:        b,
		identity: o.identity,
		cfg:      cfg,
		log:      o.logger,
		exec:     o.exec,
		onEvent:  o.listeners,
		entries:  make(map[string]*entry),
		groups:   make(map[string]*groupState),
		loopDone: make(chan struct{}),
		done:     make(chan struct{}),
	}
	c.notifier, _ = b.(ReleaseNotifier)
	if len(c.onEvent) > 0 {
		c.events = newDispatcher(c.exec)
		c.deliver = task{run: c.deliverEvents}
	}
	c.loopCtx, c.loopStop = context.WithCancel(context.Background())
	go c.run()
	return c, nil
}

// Config returns the client's timing with every default filled in.
func (c *Client) Config() Config { return c.cfg }

// lock and unlock guard the engine state. unlock runs the effects queued
// meanwhile (callbacks, events, goroutine starts) after releasing the
// lock, so that no user code ever runs under it.
func (c *Client) lock() { c.mu.Lock() }

func (c *Client) unlock() {
	fx := c.effects
	c.effects = nil
	kick := c.kickEvents
	c.kickEvents = false
	c.mu.Unlock()
	for _, f := range fx {
		f()
	}
	if kick {
		c.events.kick()
	}
}

// after queues f to run once the lock is released. Call with the lock held.
func (c *Client) after(f func()) { c.effects = append(c.effects, f) }

// goBackground starts f on a goroutine tracked by Close. Call with the
// lock held.
func (c *Client) goBackground(f func(ctx context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.loopCtx)
	}()
}

// Events are handed to the events dispatcher at once, up to eventBurst
// deliveries in an eventLinger window; past that, the events of the window
// wait for its end and go as one batch. A client acquiring and releasing
// at a high rate then pays for a few dispatcher tasks per eventLinger, not
// one per event, and an event is never more than eventLinger late.
const (
	eventLinger = time.Millisecond
	eventBurst  = 8
)

// emit publishes an event to the listeners. Call with the lock held.
// Events wait in evPending, in order, for a deliver task on the events
// dispatcher that hands every event pending to the listeners. No event
// allocates once the buffers have grown to the size of a burst.
func (c *Client) emit(e Event) {
	if c.events == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	c.evMu.Lock()
	defer c.evMu.Unlock()
	c.evPending = append(c.evPending, e)
	if c.evQueued {
		return
	}
	c.evQueued = true
	if e.Time.Sub(c.evWindow) >= eventLinger {
		c.evWindow, c.evBurst = e.Time, 0
	}
	if c.evBurst < eventBurst {
		c.evBurst++
		c.events.enqueue(c.deliver)
		c.kickEvents = true
		return
	}
	wait := eventLinger - e.Time.Sub(c.evWindow)
	c.evArmed = true
	if c.evTimer == nil {
		c.evTimer = time.AfterFunc(wait, c.lingerEnded)
		return
	}
	c.evTimer.Reset(wait)
}

// lingerEnded hands the events pending to the events dispatcher: the end
// of a burst's wait, or Close.
func (c *Client) lingerEnded() {
	c.evMu.Lock()
	if !c.evArmed {
		c.evMu.Unlock()
		return
	}
	c.evArmed = false
	c.evTimer.Stop()
	c.evWindow, c.evBurst = time.Now(), 1
	c.evMu.Unlock()
	c.events.push(c.deliver)
}

// deliverEvents is the events dispatcher's task: it hands the events
// pending to every listener, in order. Tasks of the dispatcher run one at
// a time, so batches are delivered in the order they were taken.
func (c *Client) deliverEvents(ctx context.Context) {
	c.evMu.Lock()
	batch := c.evPending
	c.evPending = c.evSpare
	c.evSpare = nil
	c.evQueued = false
	c.evMu.Unlock()
	for i := range batch {
		for _, fn := range c.onEvent {
			c.callListener(ctx, fn, batch[i])
		}
	}
	clear(batch) // drop the errors the events refer to
	c.evMu.Lock()
	if c.evSpare == nil {
		c.evSpare = batch[:0]
	}
	c.evMu.Unlock()
}

// callListener runs one event listener, recovering a panic so that the
// next listeners still get the event.
func (c *Client) callListener(ctx context.Context, fn func(context.Context, Event), e Event) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("simba: event listener panicked", "event", e.Kind.String(), "err", fmt.Errorf("panic: %v", r))
		}
	}()
	fn(ctx, e)
}

// Close stops every election and lock of the client, closes the session so
// that the backend frees every lease at once (R-SES-4), and waits for the
// last callbacks, bounded by ctx. Terms end with Stopped. Called from a
// callback or leader work with the ctx it got, Close does not wait for that
// callback itself (R-CB-5). Close is idempotent; later calls return nil.
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c.lock()
	if c.closed {
		c.unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.status = StatusClosed
	var dispatchers []*dispatcher
	var working []*Term
	var attempts []*callContext
	for _, e := range c.entries {
		if e.term != nil {
			working = append(working, e.term)
		}
		if e.attempt != nil {
			attempts = append(attempts, e.attempt.ctx)
		}
		if d := e.shutdown(); d != nil {
			dispatchers = append(dispatchers, d)
		}
	}
	sess := c.sess
	c.sess = nil
	if sess != nil {
		sess.ended = true
	}
	c.emit(Event{Kind: EventSessionClosed, Session: sessionID(sess)})
	c.unlock()

	// Ordered handover: the leader work exits (or its deadline passes)
	// before the session, and with it every lease, is released (R-HO-1).
	self := callbackDispatcher(ctx)
	for _, t := range working {
		if t != workTerm(ctx) { // work that closes the client does not wait for itself (R-CB-5)
			t.awaitWork(t.clock.deadlineTime())
		}
	}
	c.loopStop()
	for _, a := range attempts {
		a.stop() // the attempts made on callers' goroutines end with the loop's
	}
	<-c.loopDone
	var err error
	if sess != nil {
		cctx, cancel := context.WithTimeout(context.Background(), sess.renewPeriod())
		if cerr := c.b.CloseSession(cctx, sess.id); cerr != nil {
			err = fmt.Errorf("simba: close session %s: %w", sess.id, cerr)
		}
		cancel()
	}
	c.wg.Wait()

	if self != nil || workTerm(ctx) != nil {
		// Called from a callback or leader work: its ctx may end with the
		// term just revoked, and waiting for other callbacks from there
		// could wait for a callback that waits for this one (R-CB-5).
		return err
	}
	if c.events != nil {
		c.lingerEnded()
		dispatchers = append(dispatchers, c.events)
	}
	for _, d := range dispatchers {
		select {
		case <-d.idle():
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
	return err
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func sessionID(s *session) SessionID {
	if s == nil {
		return ""
	}
	return s.id
}

// run is the session loop: it opens a session, keeps it alive until it
// ends, and opens the next, until Close.
func (c *Client) run() {
	defer close(c.loopDone)
	for {
		sess := c.open()
		if sess == nil {
			return
		}
		if !c.keepAlive(sess) {
			return
		}
	}
}

// open opens a session, retrying with growing backoff, and installs it.
// It returns nil when the client is closing.
func (c *Client) open() *session {
	backoff := c.cfg.MinBackoff
	for {
		sentAt := time.Now()
		ctx, cancel := context.WithTimeout(c.loopCtx, c.cfg.RenewInterval)
		grant, err := c.openSession(ctx)
		cancel()
		if c.loopCtx.Err() != nil {
			if err == nil {
				c.closeAbandoned(grant.ID)
			}
			return nil
		}
		if err == nil {
			s := &session{id: grant.ID, clock: newSessionClock(), released: make(map[string]uint64)}
			c.lock()
			if c.closed {
				c.unlock()
				c.closeAbandoned(grant.ID)
				return nil
			}
			c.applyGrant(s, sentAt, grant.Remaining, true)
			if s.clock.remaining() > 0 {
				c.sess = s
				c.status = StatusLive
				c.emit(Event{Kind: EventSessionOpened, Session: s.id, Granted: grant.Remaining})
				c.log.Debug("simba: session opened", "session", s.id, "granted", grant.Remaining)
				for _, e := range c.entries {
					e.contend()
				}
				for _, gs := range c.groups {
					gs.members = 0 // unknown until the new session joins
					c.join(s, gs)
				}
				c.unlock()
				return s
			}
			c.unlock()
			c.closeAbandoned(grant.ID)
			err = fmt.Errorf("simba: session %s granted %v, too short to use", grant.ID, grant.Remaining)
		}
		c.log.Debug("simba: open session failed", "err", err)
		c.lock()
		c.emit(Event{Kind: EventBackendError, Err: err})
		c.unlock()
		if !c.sleep(backoff) {
			return nil
		}
		backoff = min(backoff*2, c.cfg.RenewInterval)
	}
}

// openSession opens a session carrying the client's identity where the
// backend stores one.
func (c *Client) openSession(ctx context.Context) (SessionGrant, error) {
	if o, ok := c.b.(IdentityOpener); ok {
		return o.OpenSessionAs(ctx, c.cfg.LeaseDuration, c.identity)
	}
	return c.b.OpenSession(ctx, c.cfg.LeaseDuration)
}

// closeAbandoned closes a session nobody will use, best effort.
func (c *Client) closeAbandoned(id SessionID) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewInterval)
	defer cancel()
	_ = c.b.CloseSession(ctx, id)
}

// sleep waits d, and reports false when the client closes first.
func (c *Client) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.loopCtx.Done():
		return false
	}
}

// applyGrant applies R-DL-1 and R-DL-5 to a grant of remaining measured
// from a call sent at sentAt: the first grant of a new session when first
// is set, a renewal otherwise. A renewal never moves a deadline that has
// passed (R-DL-3); applyGrant then reports false. Call with the lock held.
func (c *Client) applyGrant(s *session, sentAt time.Time, remaining time.Duration, first bool) bool {
	local := c.cfg.localValidity(remaining)
	if first {
		s.clock.start(sentAt.Add(local))
	} else if !s.clock.extend(sentAt.Add(local)) {
		return false
	}
	s.renew.Store(int64(c.cfg.RenewInterval))
	if remaining < c.cfg.LeaseDuration && 2*c.cfg.RenewInterval > local {
		s.renew.Store(int64(max(local/3, time.Millisecond)))
		if !s.shortened {
			s.shortened = true
			c.emit(Event{Kind: EventSessionLeaseShortened, Session: s.id, Granted: remaining})
			c.log.Warn("simba: backend granted a shorter lease than asked; renewing every third of it",
				"session", s.id, "asked", c.cfg.LeaseDuration, "granted", remaining, "renew", s.renewPeriod())
		}
	}
	return true
}

// keepAlive renews s until it ends. It reports false when the client is
// closing, true when s ended and a new session is needed.
func (c *Client) keepAlive(s *session) bool {
	next := time.Now().Add(s.renewPeriod())
	for {
		deadline := s.clock.deadlineTime()
		wake := next
		if deadline.Before(wake) {
			wake = deadline
		}
		if !c.sleep(time.Until(wake)) {
			return false
		}
		if !time.Now().Before(deadline) {
			c.endSession(s, DeadlinePassed, nil)
			return true
		}
		sentAt := time.Now()
		callEnd := sentAt.Add(s.renewPeriod())
		if deadline.Before(callEnd) {
			callEnd = deadline
		}
		ctx, cancel := context.WithDeadline(c.loopCtx, callEnd)
		reply, err := c.b.KeepAlive(ctx, s.id, c.cfg.LeaseDuration)
		cancel()
		now := time.Now()
		if c.loopCtx.Err() != nil {
			return false
		}
		if c.events != nil {
			c.lock()
			c.emit(Event{Kind: EventKeepAlive, Session: s.id, Latency: now.Sub(sentAt), Err: err})
			c.unlock()
		}
		switch {
		case !now.Before(deadline):
			// A late reply never extends a passed deadline (R-DL-3).
			c.endSession(s, DeadlinePassed, err)
			return true
		case errors.Is(err, ErrSessionExpired):
			c.endSession(s, SessionExpired, err)
			return true
		case err != nil:
			wait := min(max(deadline.Sub(now)/2, c.cfg.MinBackoff), c.cfg.RenewInterval)
			next = now.Add(wait)
			c.suspend(s, err)
		default:
			if hook := testHookKeepAliveReply.Load(); hook != nil {
				(*hook)()
			}
			if !c.renewed(s, sentAt, reply) {
				return true // the deadline passed before the renewal was applied
			}
			next = sentAt.Add(s.renewPeriod())
		}
	}
}

// suspend records a failed keep-alive (R-DL-4).
func (c *Client) suspend(s *session, err error) {
	c.lock()
	defer c.unlock()
	if c.sess != s {
		return
	}
	if c.status != StatusSuspended {
		c.status = StatusSuspended
		c.emit(Event{Kind: EventSessionSuspended, Session: s.id, Err: err})
		c.log.Info("simba: keep-alive failed, session suspended", "session", s.id, "err", err)
	}
}

// testHookKeepAliveReply, when set by a test, runs between the receipt of a
// keep-alive reply and its application.
var testHookKeepAliveReply atomic.Pointer[func()]

// renewed applies a successful keep-alive reply. It reports false when the
// session ended instead: the local deadline passed before the reply could
// be applied, so the session ends with DeadlinePassed (R-DL-3).
func (c *Client) renewed(s *session, sentAt time.Time, reply KeepAliveReply) bool {
	c.lock()
	defer c.unlock()
	if c.sess != s {
		return true
	}
	if !c.applyGrant(s, sentAt, reply.Remaining, false) {
		c.endSessionLocked(s, DeadlinePassed, nil)
		return false
	}
	if c.status != StatusLive {
		c.status = StatusLive
		c.emit(Event{Kind: EventSessionRestored, Session: s.id})
	}
	for name, e := range c.entries {
		t := e.term
		if t == nil {
			// An orphan: a release that never landed. Not while a handover
			// still holds the lease for its work (R-HO-1).
			if tok, ok := reply.Leases[name]; ok && e.attempt == nil && !e.handingOver && !c.closed {
				e.release(s, tok)
			}
			continue
		}
		if t.session != s.id || !t.wonAt.Before(sentAt) {
			continue // won after the keep-alive was sent: the reply may predate it
		}
		if tok, ok := reply.Leases[name]; !ok || tok != t.token {
			e.lost(TakenOver) // R-TERM-8
		}
	}
	for name, tok := range reply.Leases {
		if _, ok := c.entries[name]; !ok && !c.closed {
			c.releaseAsync(s, name, tok, nil)
		}
	}
	c.groupCounts(reply.Groups)
	return true
}

// releaseAsync gives the lease name back at token in the background,
// recording the token first so no later reply of this session adopts it
// (R-CAND-4, R-TERM-7), then runs after, if not nil, with the lock held.
// Nothing is sent for an ended session: it reports whether the release
// started. Call with the lock held.
func (c *Client) releaseAsync(s *session, name string, token uint64, after func()) bool {
	if s.ended {
		return false
	}
	s.noteReleased(name, token)
	c.goBackground(func(ctx context.Context) {
		_ = c.callRelease(ctx, s, name, token)
		if after != nil {
			c.lock()
			defer c.unlock()
			after()
		}
	})
	return true
}

// noteReleased records that the session released name at token.
func (s *session) noteReleased(name string, token uint64) {
	if token > s.released[name] {
		s.released[name] = token
	}
}

// callRelease releases name at token on the backend, bounded by the renew
// period in effect.
func (c *Client) callRelease(ctx context.Context, s *session, name string, token uint64) error {
	cctx := withCallDeadline(ctx, s.renewPeriod())
	defer cctx.stop()
	err := c.b.Release(cctx, s.id, name, token)
	if err != nil {
		c.log.Debug("simba: release failed", "name", name, "token", token, "err", err)
		return fmt.Errorf("simba: release %s token %d: %w", name, token, err)
	}
	return nil
}

// endSession ends s: every term of it is revoked with reason, and the loop
// opens a new session.
func (c *Client) endSession(s *session, reason RevokeReason, cause error) {
	c.lock()
	defer c.unlock()
	c.endSessionLocked(s, reason, cause)
}

// endSessionLocked is endSession with the lock held.
func (c *Client) endSessionLocked(s *session, reason RevokeReason, cause error) {
	if c.sess != s {
		return
	}
	s.ended = true
	c.sess = nil
	c.status = StatusOpening
	for _, e := range c.entries {
		if e.term != nil && e.term.session == s.id {
			e.lost(reason)
		}
	}
	kind := EventSessionExpired
	if reason == DeadlinePassed {
		kind = EventSessionDeadlinePassed
		// The backend may still hold the session: free its leases sooner.
		c.goBackground(func(context.Context) { c.closeAbandoned(s.id) })
	}
	c.emit(Event{Kind: kind, Session: s.id, Err: cause})
	c.log.Warn("simba: session ended, every term revoked", "session", s.id, "reason", reason, "err", cause)
}

// jitteredRetry is a candidate's wait between attempts (R-CAND-1).
func (c *Client) jitteredRetry() time.Duration {
	d := c.cfg.RenewInterval / 2
	if c.cfg.RetryJitter > 0 {
		d += rand.N(c.cfg.RetryJitter)
	}
	return d
}

// quietHandler passes warnings and errors to the wrapped handler and drops
// the rest, so a client is quiet by default.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
