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
	// in line; forget takes this notifier out of the queues of names once
	// its last waiter of them is gone. Both run on goroutines of their own
	// (tasks), and close calls forget too.
	pass   func(ctx context.Context, name string)
	forget func(ctx context.Context, names ...string)
	// sub is the subscription goroutine, tasks those of pass and forget;
	// they run under ctx, which close cancels. close waits for sub; wait
	// waits for tasks.
	sub    sync.WaitGroup
	tasks  sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc

	mu            sync.Mutex
	waiters       map[string]map[*waiter]struct{}
	forgets       map[string]chan struct{} // names whose forget task runs, closed when it ends
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

func newNotifier(client redis.UniversalClient, channel, id string, log *slog.Logger,
	pass func(context.Context, string), forget func(context.Context, ...string),
) *notifier {
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
		forgets: make(map[string]chan struct{}),
		ready:   make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
}

// taskTimeout bounds a pass or forget request. Those are best effort (a
// wake they lose costs a candidate its next regular attempt), and a
// Backend whose client is not its own does not wait for them in Close:
// they end by this deadline on their own.
const taskTimeout = time.Second

// leaveTimeout bounds the one request of close that takes the notifier
// out of the queues of the names it still watched or was leaving.
const leaveTimeout = 250 * time.Millisecond

// spawn runs f on a goroutine of its own, with a context that ends after
// taskTimeout or with close, unless the notifier is closed. n.mu must be
// held.
func (n *notifier) spawn(f func(ctx context.Context)) {
	if n.closed {
		return
	}
	n.tasks.Go(func() {
		ctx, cancel := context.WithTimeout(n.ctx, taskTimeout)
		defer cancel()
		f(ctx)
	})
}

// leaveLocked takes the notifier out of name's queue on the server, its
// last waiter of name being gone, on a goroutine of its own. n.mu must be
// held.
//
// Until that request is answered, n.forgets[name] is open and a new watch
// of name waits for it before it queues the notifier again: the ZREM must
// not land after the new watch's ZADD, which would leave the notifier out
// of the queue while it watches. When a new watch of name registered
// before the request was sent, none is sent: the notifier keeps its place.
// A forget already under way covers a later one, since a watch registered
// meanwhile has not queued the notifier yet.
func (n *notifier) leaveLocked(name string) {
	if n.forget == nil || n.closed || n.forgets[name] != nil {
		return
	}
	done := make(chan struct{})
	n.forgets[name] = done
	n.spawn(func(ctx context.Context) {
		n.mu.Lock()
		if len(n.waiters[name]) == 0 {
			n.mu.Unlock()
			n.forget(ctx, name)
			n.mu.Lock()
		}
		delete(n.forgets, name)
		close(done)
		n.mu.Unlock()
	})
}

// watch registers a waiter for name that lives until it is woken or ctx
// is done. It first waits, bounded by ctx, until the subscription is live,
// and then, when the notifier is leaving name's queue, until that request
// is answered (see leaveLocked), so that the caller may queue it again.
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
	if leaving := n.forgets[name]; leaving != nil {
		n.mu.Unlock()
		select {
		case <-leaving:
		case <-ctx.Done(): // w is dropped
			n.mu.Lock()
			return nil, ctx.Err()
		case <-n.ctx.Done(): // closed: w was woken
			n.mu.Lock()
			return nil, ErrClosed
		}
		n.mu.Lock()
	}
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
		n.leaveLocked(w.name)
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
	case n.pass != nil:
		n.spawn(func(ctx context.Context) { n.pass(ctx, name) })
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
	n.sub.Go(func() { n.run(n.ctx) })
}

// close stops the subscription, waits for its goroutine, wakes every
// waiter and takes the notifier out of the queues of the names it watched
// or was leaving (their forget tasks are cancelled): a release must not be
// handed to a notifier that is gone while live waiters queue behind it.
// That is one request, waited for at most leaveTimeout; close waits for
// no other answer of the server, and not for the pass and forget tasks
// (see wait). It is idempotent.
func (n *notifier) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.cancel()
	ps := n.ps
	var queued []string
	for name := range n.waiters {
		queued = append(queued, name)
	}
	for name := range n.forgets {
		if n.waiters[name] == nil {
			queued = append(queued, name)
		}
	}
	n.wakeAllLocked()
	if !n.live {
		close(n.ready) // watches waiting for a subscription return ErrClosed
	}
	n.mu.Unlock()
	if ps != nil {
		_ = ps.Close() // interrupts a blocked receive
	}
	if len(queued) > 0 && n.forget != nil {
		ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
		n.forget(ctx, queued...)
		cancel()
	}
	n.sub.Wait()
}

// wait waits for the pass and forget tasks, which end by their deadline,
// or at once once the client is closed.
func (n *notifier) wait() { n.tasks.Wait() }

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
