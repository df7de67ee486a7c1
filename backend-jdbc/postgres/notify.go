package simbapg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	simba "github.com/simba-go/simba/core"
)

// Pauses between the attempts to listen again after the listening
// connection was lost: from relistenPause, doubling up to relistenPauseMax.
const (
	relistenPause    = 100 * time.Millisecond
	relistenPauseMax = 5 * time.Second
)

// probeWait bounds the sending of a probe, and apart from it the wait for
// its notification; deafPause is the pause before listening again after a
// first probe that never arrived.
const (
	probeWait = 3 * time.Second
	deafPause = time.Minute
)

// reprobeEvery is how long a listening connection may stay quiet before
// it is probed again: a connection whose server froze, or whose path
// dropped without a reset, receives nothing and reports no error, while
// the pool may already reach another primary.
var reprobeEvery = 30 * time.Second

// errUnheard is the error of a probe that was sent but did not arrive on
// the listening connection within probeWait.
var errUnheard = errors.New("simbapg: the probe did not reach the listening connection")

// errDeaf is the error of a watch while the listening connection receives
// nothing: a connection pooler in transaction mode runs LISTEN on a server
// session that then serves other clients.
var errDeaf = fmt.Errorf("%w: the listening connection receives no notifications (a connection pooler in transaction mode?): waiters take leases at their regular attempts", simba.ErrNotSupported)

// listener holds the one connection of a backend that LISTENs on the
// release channel, taken from the pool on the first watch and owned from
// then on (the pool no longer counts it), and hands each notification to
// the watches of the lease it names. When the connection fails, every
// watch is woken, since a release may have been missed while it was down,
// and a new connection listens as soon as one can be had: a missed
// notification only delays a waiter to its next regular attempt.
type listener struct {
	pool    *pgxpool.Pool
	channel string

	mu      sync.Mutex
	watches map[string]map[*relWatch]struct{}
	ready   chan struct{} // closed while a connection listens
	deaf    bool          // the last connection's probe never arrived
	lastErr error         // why the last attempt to listen failed; nil once one listens
	started bool
	closed  bool
	stop    context.CancelFunc
	done    chan struct{}
}

// relWatch is one watch of a lease's release.
type relWatch struct {
	fired chan struct{}
	stop  func() bool // unregisters the drop at the end of the watch's context
}

// end closes the watch. Call with l.mu held, the watch removed.
func (w *relWatch) end() {
	close(w.fired)
	w.stop()
}

func newListener(pool *pgxpool.Pool, channel string) *listener {
	return &listener{pool: pool, channel: channel, watches: map[string]map[*relWatch]struct{}{}, ready: make(chan struct{})}
}

// Listen registers a watch of name until ctx ends. fired is closed on a
// notification of name, when the listening connection is lost, or when the
// listener is closed; ready is closed once a connection listens (it may
// already be). drop removes the watch; calling it again, or after fired,
// is harmless. It fails with an error matching simba.ErrNotSupported while
// the last listening connection received nothing.
func (l *listener) Listen(ctx context.Context, name string) (fired, ready <-chan struct{}, drop func(), err error) {
	w := &relWatch{fired: make(chan struct{})}
	drop = func() { l.drop(name, w) }
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deaf {
		return nil, nil, nil, errDeaf
	}
	if l.closed {
		close(w.fired)
		return w.fired, w.fired, func() {}, nil
	}
	w.stop = context.AfterFunc(ctx, drop)
	if !l.started {
		l.started = true
		ctx, cancel := context.WithCancel(context.Background())
		l.stop, l.done = cancel, make(chan struct{})
		go l.run(ctx)
	}
	set := l.watches[name]
	if set == nil {
		set = map[*relWatch]struct{}{}
		l.watches[name] = set
	}
	set[w] = struct{}{}
	return w.fired, l.ready, drop, nil
}

func (l *listener) drop(name string, w *relWatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if set := l.watches[name]; set != nil {
		if _, ok := set[w]; ok {
			delete(set, w)
			w.stop()
		}
		if len(set) == 0 {
			delete(l.watches, name)
		}
	}
}

// notify wakes the watches of name.
func (l *listener) notify(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.watches[name] {
		w.end()
	}
	delete(l.watches, name)
}

// lost wakes every watch and marks the listener as not listening.
func (l *listener) lost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, set := range l.watches {
		for w := range set {
			w.end()
		}
	}
	clear(l.watches)
	select {
	case <-l.ready:
		l.ready = make(chan struct{})
	default:
	}
}

// listening marks the listener as listening.
func (l *listener) listening() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deaf, l.lastErr = false, nil
	close(l.ready)
}

// deafened marks the listener as receiving nothing, for the reason err,
// and wakes every watch.
func (l *listener) deafened(err error) {
	l.mu.Lock()
	l.deaf = true
	l.mu.Unlock()
	l.failed(err)
	l.lost()
}

// run listens until ctx ends, on one connection at a time.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	defer l.lost()
	pause := relistenPause
	for ctx.Err() == nil {
		listened, deaf := l.listen(ctx)
		if listened {
			// A connection that listened was lost: wake its watches. A
			// connection that could not listen wakes nobody: the watches
			// wait for one that does, within WatchWait.
			pause = relistenPause
			l.lost()
		}
		wait := pause
		if deaf {
			wait = deafPause
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, relistenPauseMax)
	}
}

// listen takes a connection, listens, checks that a notification reaches
// it, and dispatches notifications until the connection fails or ctx ends.
// It reports whether the connection listened, and whether the probe never
// arrived.
func (l *listener) listen(ctx context.Context) (listened, deaf bool) {
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		l.failed(fmt.Errorf("take a connection: %w", err))
		return false, false
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		l.failed(fmt.Errorf("LISTEN: %w", err))
		return false, false
	}
	switch err := l.probe(ctx, conn); {
	case errors.Is(err, errUnheard):
		l.deafened(err)
		return false, true
	case err != nil:
		l.failed(err)
		return false, false
	}
	l.listening()
	for {
		wctx, cancel := context.WithTimeout(ctx, reprobeEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			l.notify(n.Payload)
			continue
		case ctx.Err() != nil || wctx.Err() == nil || conn.IsClosed():
			return true, false
		}
		// Quiet for reprobeEvery: a probe that cannot be sent (a busy
		// pool) says nothing about conn, one sent but not heard means
		// conn is lost.
		if err := l.probe(ctx, conn); errors.Is(err, errUnheard) || conn.IsClosed() {
			return true, false
		}
	}
}

// probe notifies the channel with an empty payload (no lease name is
// empty) from another connection and waits for it on conn, dispatching
// the names that arrive first. Sending and waiting are bounded by
// probeWait each: a pool slow to hand out a connection is not a deaf
// listener. It fails with errUnheard when the probe was sent and did not
// arrive in time.
func (l *listener) probe(ctx context.Context, conn *pgx.Conn) error {
	sctx, cancel := context.WithTimeout(ctx, probeWait)
	_, err := l.pool.Exec(sctx, "SELECT pg_notify($1, '')", l.channel)
	cancel()
	if err != nil {
		return fmt.Errorf("simbapg: send the probe: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		switch {
		case err == nil && n.Payload == "":
			return nil
		case err == nil:
			l.notify(n.Payload)
		case ctx.Err() == nil && wctx.Err() != nil && !conn.IsClosed():
			return errUnheard
		default:
			return err
		}
	}
}

// failed records why an attempt to listen failed, unless the listener
// is closing (the attempt then ends with its context).
func (l *listener) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.lastErr = err
	}
}

// ListenError is why the last attempt to listen failed, or nil once a
// connection listens.
func (l *listener) ListenError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// Close stops the listener, closes its connection and wakes every watch.
func (l *listener) Close() {
	l.mu.Lock()
	l.closed = true
	stop, done := l.stop, l.done
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}
