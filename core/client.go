package simba

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
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

// UnmarshalText reads a status from its name; an unknown name is an error.
func (s *Status) UnmarshalText(b []byte) error {
	for i, name := range statusNames {
		if string(b) == name {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("%w: unknown session status %q", ErrInvalidArgument, b)
}

// Option configures a Client.
type Option func(*options) error

type options struct {
	identity  string
	cfg       Config
	logger    *slog.Logger
	listeners []func(context.Context, Event)
	evBuffer  int
	exec      Executor
	deferred  bool
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
// be given several times: each listener has a queue of its own and gets
// every event in order, so a slow listener delays itself only; a listener
// that panics is logged and goes on getting the next events. The ctx it
// gets marks the call as a callback: pass it to Client.Close from there,
// and Close will not wait for the listener itself.
//
// A listener's queue holds at most the events of WithEventBuffer
// (DefaultEventBuffer). When a listener is that far behind, the oldest
// event waiting is dropped for each new one, and the listener gets an
// EventDropped whose Dropped field counts the events it missed since the
// last one right before the next event it gets: where they were, as they
// were all older than what still waits. Client.EventsDropped
// counts them for every listener. The engine never waits for a listener.
//
// Events are handed over in batches: at once while they are few, and past
// eight deliveries in a millisecond, at the end of that millisecond, so
// that a client that takes thousands of locks a second pays for a few
// hand-overs, not one per event (a listener whose queue is half full is
// handed its events at once). An event thus reaches a listener that keeps
// up at most a millisecond after its Time in a burst (a test on a fake
// clock sleeps that millisecond), and Close delivers what is pending
// before it returns, bounded by its ctx. Once the queues have grown to the
// size of a burst, emitting an event allocates nothing.
func WithEventListener(fn func(ctx context.Context, e Event)) Option {
	return func(o *options) error {
		if fn == nil {
			return fmt.Errorf("%w: nil event listener", ErrInvalidArgument)
		}
		o.listeners = append(o.listeners, fn)
		return nil
	}
}

// WithDeferredStart makes New leave the session closed until Start: the
// client makes no backend call and runs no goroutine before it. Until
// then the calls that would contend for a lease or ask the backend
// (Lock.Acquire, Lock.TryAcquire, Election.Start, RunWhileLeader, Schedule,
// Group.Run, Holder, ObserveHolder, Sweep) fail at once with
// ErrClientNotStarted, rather than wait for a session nothing opens.
// Closing a client that never started makes no backend call and sends
// its listeners no event. It suits a framework that builds its components
// before starting them, and must leave nothing running when the start
// never comes (see docs/adr/0005-fxsimba-shape.md).
func WithDeferredStart() Option {
	return func(o *options) error { o.deferred = true; return nil }
}

// DefaultEventBuffer is the number of events that may wait for a listener
// by default (WithEventBuffer): about 10ms of the fastest a client emits
// (an acquire and a release every 1.5µs, on the memory backend), the
// longest a listener that does nothing was seen to lag on a loaded
// machine; at most 2.2 MB per listener while it lags (the ring, whose
// length is the bound rounded up to a power of two, 136 bytes an event),
// besides a fixed array of 64 events (8.7 kB) each listener has.
const DefaultEventBuffer = 16384

// WithEventBuffer sets how many events may wait for each event listener
// before the oldest are dropped (see WithEventListener); n must be at
// least 1. Default DefaultEventBuffer. The queue grows to n events only
// while a listener falls behind.
func WithEventBuffer(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: event buffer %d: must be at least 1", ErrInvalidArgument, n)
		}
		o.evBuffer = n
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

	// The event listeners and their queues (events.go). evMu guards the
	// queues and the timing of deliveries; it is taken after mu.
	listeners []*listener
	evBuffer  int           // the bound of each listener's queue
	evDropped atomic.Uint64 // events dropped, every listener counted
	evMu      sync.Mutex
	evTimer   *time.Timer // arranges a delayed delivery; nil until the first burst
	evArmed   bool        // evTimer is armed
	evWindow  time.Time   // start of the window of eventBurst deliveries
	evBurst   int         // deliveries arranged in that window
	evWarned  time.Time   // when dropped events were last logged

	mu         sync.Mutex
	effects    []func() // run by unlock, after the lock is released
	kickEvents bool     // unlock kicks the listeners' dispatchers
	closed     bool
	started    bool          // the session loop was started (New, or Start)
	done       chan struct{} // closed by Close
	status     Status
	sess       *session // nil while opening
	entries    map[string]*entry
	groups     map[string]*groupState
	// draining holds the dispatchers of election runs that ended (Stop)
	// while callbacks of theirs may still be queued or to come (the
	// OnRevoked of a handover still running): Close waits for them too.
	// The drained ones are dropped whenever one is added.
	draining []*dispatcher

	loopCtx  context.Context // ends the session loop and cancels calls in flight
	loopStop context.CancelFunc
	loopDone chan struct{}
	wg       sync.WaitGroup // backend calls and watches
}

// New returns a client of backend b and starts opening its session in the
// background (with WithDeferredStart, Start does): New itself makes no
// backend call and never blocks. Elections and locks may be used at once;
// they contend as soon as the session is open. It fails on a nil backend or
// an invalid option or config.
func New(b Backend, opts ...Option) (*Client, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidArgument)
	}
	if v := reflect.ValueOf(b); v.Kind() == reflect.Pointer && v.IsNil() {
		// A nil *T: the session loop would panic on its own goroutine.
		return nil, fmt.Errorf("%w: nil backend (%T)", ErrInvalidArgument, b)
	}
	o := options{exec: goExecutor{}, evBuffer: DefaultEventBuffer}
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
		evBuffer: o.evBuffer,
		entries:  make(map[string]*entry),
		groups:   make(map[string]*groupState),
		loopDone: make(chan struct{}),
		done:     make(chan struct{}),
	}
	c.notifier, _ = b.(ReleaseNotifier)
	for _, fn := range o.listeners {
		c.listeners = append(c.listeners, c.newListener(fn))
	}
	c.loopCtx, c.loopStop = context.WithCancel(context.Background())
	if !o.deferred {
		c.started = true
		go c.run()
	}
	return c, nil
}

// Start starts opening the session of a client built WithDeferredStart, in
// the background, as New does without that option: it makes no backend
// call and never blocks. It is idempotent, a no-op on a client built
// without the option, and fails with ErrClosed after Close.
func (c *Client) Start() error {
	c.lock()
	defer c.unlock()
	if c.closed {
		return fmt.Errorf("simba: start: %w", ErrClosed)
	}
	if !c.started {
		c.started = true
		go c.run()
	}
	return nil
}

// checkStarted returns ErrClientNotStarted before Start of a client built
// WithDeferredStart, ErrClosed after Close, nil otherwise.
func (c *Client) checkStarted() error {
	c.lock()
	defer c.unlock()
	switch {
	case c.closed:
		return ErrClosed
	case !c.started:
		return ErrClientNotStarted
	}
	return nil
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
		c.kickListeners()
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

// quietHandler passes warnings and errors to the wrapped handler and drops
// the rest, so a client is quiet by default.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
