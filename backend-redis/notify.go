package simbaredis

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timing of the release subscription.
const (
	// defaultHealthInterval is how long the subscription may stay silent
	// before it is pinged; a ping unanswered for as long again counts as a
	// lost connection.
	defaultHealthInterval = 5 * time.Second
	// minResubscribe and maxResubscribe bound the backoff between attempts
	// to subscribe again after the subscription was lost.
	minResubscribe = 100 * time.Millisecond
	maxResubscribe = 5 * time.Second
)

// notifier owns a Backend's one subscription to the release channel and
// dispatches its messages to per-name waiters. The subscription starts with
// the first watch and ends with close.
//
// A waiter is registered only while the subscription is live (confirmed by
// the server), so it hears every release published after it was
// registered, unless the connection breaks. A broken subscription is
// replaced by a new one, and its confirmation wakes every waiter registered
// before, because a release may have gone by while nobody listened. Watches
// asked for meanwhile wait for the new subscription instead.
type notifier struct {
	client  redis.UniversalClient
	channel string
	log     *slog.Logger
	health  time.Duration
	// id names this notifier in the waiter queues: a release announced
	// for another id is not for this one's waiters.
	id string
	// pass hands a wake this notifier has no waiter for on to the next
	// in line; forget takes this notifier out of name's queue once its
	// last waiter of name is gone. Both run on goroutines of their own,
	// which close waits for.
	pass, forget func(ctx context.Context, name string)
	// tasks are the subscription goroutine and those of pass and forget,
	// which run under ctx; close cancels it and waits for them.
	tasks  sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc

	mu            sync.Mutex
	waiters       map[string]map[*waiter]struct{}
	started       bool
	closed        bool
	ps            *redis.PubSub // the current subscription, closed by close
	live          bool          // the current subscription is confirmed
	ready         chan struct{} // closed once live or closed
	subscriptions int           // confirmed (re)subscriptions so far
}

// waiter is one WatchRelease call.
type waiter struct {
	name string
	ch   chan struct{}
	stop func() bool // deregisters the context.AfterFunc that drops it
}

func newNotifier(client redis.UniversalClient, channel, id string, log *slog.Logger, pass, forget func(context.Context, string)) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{
		client:  client,
		channel: channel,
		id:      id,
		log:     log,
		pass:    pass,
		forget:  forget,
		health:  defaultHealthInterval,
		waiters: make(map[string]map[*waiter]struct{}),
		ready:   make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
}

// taskTimeout bounds a pass or forget request.
const taskTimeout = 5 * time.Second

// spawn runs f(name) on a goroutine of its own, unless f is nil or the
// notifier is closed. n.mu must be held.
func (n *notifier) spawn(f func(ctx context.Context, name string), name string) {
	if f == nil || n.closed {
		return
	}
	n.tasks.Go(func() {
		ctx, cancel := context.WithTimeout(n.ctx, taskTimeout)
		defer cancel()
		f(ctx, name)
	})
}

// watch registers a waiter for name that lives until it is woken or ctx
// is done. It first waits, bounded by ctx, until the subscription is live.
func (n *notifier) watch(ctx context.Context, name string) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for !n.live && !n.closed {
		if !n.started {
			n.start()
		}
		ready := n.ready
		n.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			n.mu.Lock()
			return nil, ctx.Err()
		}
		n.mu.Lock()
	}
	if n.closed {
		return nil, ErrClosed
	}
	w := &waiter{name: name, ch: make(chan struct{})}
	set := n.waiters[name]
	if set == nil {
		set = make(map[*waiter]struct{})
		n.waiters[name] = set
	}
	set[w] = struct{}{}
	// Registered under n.mu: drop cannot run before w.stop is set.
	w.stop = context.AfterFunc(ctx, func() { n.drop(w) })
	return w.ch, nil
}

// drop removes w without waking it (its context ended); the last waiter
// of a name also leaves the name's queue on the server.
func (n *notifier) drop(w *waiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	set := n.waiters[w.name]
	if _, ok := set[w]; !ok {
		return
	}
	delete(set, w)
	if len(set) == 0 {
		delete(n.waiters, w.name)
		n.spawn(n.forget, w.name)
	}
}

// wakeLocked wakes and removes every waiter of name. n.mu must be held.
func (n *notifier) wakeLocked(name string) {
	for w := range n.waiters[name] {
		close(w.ch)
		w.stop()
	}
	delete(n.waiters, name)
}

// wakeAllLocked wakes and removes every waiter. n.mu must be held.
func (n *notifier) wakeAllLocked() {
	for name := range n.waiters {
		n.wakeLocked(name)
	}
}

// released wakes the waiters of name.
func (n *notifier) released(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wakeLocked(name)
}

// own returns the channel of releases handed to this notifier alone.
func (n *notifier) own() string { return n.channel + ":" + n.id }

// message handles a message: on the shared channel, the name of a lease
// whose waiters all wake (a session closed, or a release by a version of
// this package that announced to all); on the notifier's own channel, a
// release handed to it as the first in the lease's queue. One that finds
// no waiter of the name (it gave up, or won meanwhile) is passed on to the
// next in line.
func (n *notifier) message(channel, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case channel != n.own() || len(n.waiters[name]) > 0:
		n.wakeLocked(name)
	default:
		n.spawn(n.pass, name)
	}
}

// subscribed marks the subscription live and wakes every waiter: they
// were registered on an earlier subscription that was lost. A confirmation
// that arrives after close, which closed ready already, changes nothing.
func (n *notifier) subscribed() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.subscriptions++
	n.wakeAllLocked()
	if !n.live {
		n.live = true
		close(n.ready)
	}
}

// lost marks the subscription as no longer live: new watches wait for the
// next one.
func (n *notifier) lost() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.live && !n.closed {
		n.live = false
		n.ready = make(chan struct{})
	}
}

// start launches the subscription goroutine. n.mu must be held.
func (n *notifier) start() {
	n.started = true
	n.tasks.Go(func() { n.run(n.ctx) })
}

// close stops the subscription, waits for its goroutine and wakes every
// waiter. It is idempotent.
func (n *notifier) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.cancel()
	ps := n.ps
	n.wakeAllLocked()
	if !n.live {
		close(n.ready) // watches waiting for a subscription return ErrClosed
	}
	n.mu.Unlock()
	if ps != nil {
		_ = ps.Close() // interrupts a blocked receive
	}
	n.tasks.Wait()
}

// setPS makes ps the current subscription, or reports false when the
// notifier was closed meanwhile.
func (n *notifier) setPS(ps *redis.PubSub) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.ps = ps
	return true
}

// run keeps a subscription to the release channel until ctx ends.
func (n *notifier) run(ctx context.Context) {
	delay := minResubscribe
	for {
		ps := n.client.Subscribe(ctx, n.channel, n.own())
		if !n.setPS(ps) {
			_ = ps.Close()
			return
		}
		live, err := n.receive(ctx, ps)
		n.lost()
		_ = ps.Close()
		if ctx.Err() != nil {
			return
		}
		if live {
			delay = minResubscribe
		}
		n.log.Debug("simbaredis: release subscription lost, subscribing again", "error", err, "after", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, maxResubscribe)
	}
}

// receive dispatches the messages of ps until it fails. live reports
// whether the subscription was confirmed before it failed.
func (n *notifier) receive(ctx context.Context, ps *redis.PubSub) (live bool, err error) {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, n.health)
		if err != nil {
			if ctx.Err() != nil || pinged || !isTimeout(err) {
				return live, err
			}
			if err := ps.Ping(ctx); err != nil {
				return live, err
			}
			pinged = true
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			// Live once both channels are confirmed.
			if m.Kind == "subscribe" && m.Count == 2 {
				live = true
				n.subscribed()
			}
		case *redis.Message:
			n.message(m.Channel, m.Payload)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
